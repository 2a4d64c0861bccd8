// Protocol tests: the real `fastcomplete serve` driven through vscode-languageserver-protocol,
// the library VS Code's language client is built on.
import { strict as assert } from "node:assert";
import { ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import {
  createProtocolConnection,
  ExecuteCommandRequest,
  InitializeRequest,
  InlineCompletionRequest,
  ProtocolConnection,
  StreamMessageReader,
  StreamMessageWriter,
  WorkDoneProgress,
  WorkDoneProgressCreateRequest,
} from "vscode-languageserver-protocol/node";

const repo = resolve(__dirname, "..", "..", "..", "..");
const python = process.env.FASTCOMPLETE_PYTHON ?? join(repo, ".venv", "bin", "python");
const home = process.env.FASTCOMPLETE_HOME ?? join(homedir(), ".cache", "fastcomplete");
const model = join(home, "models", "smollm2-135m");
const uri = "file:///work/orders.py";
const text = "def revenue(orders):\n    return sum(order.";

let server: ChildProcess;
let connection: ProtocolConnection;

before(async () => {
  assert.ok(existsSync(python), `no Python at ${python}: run make install first`);
  assert.ok(existsSync(join(model, "fast")), `no model at ${model}: run fastcomplete models build`);
  server = spawn(python, ["-m", "lsp_server.cli", "serve"], {
    cwd: repo,
    env: { ...process.env, FASTCOMPLETE_HOME: mkdtempSync(join(tmpdir(), "fc-vscode-")) },
    stdio: ["pipe", "pipe", "inherit"],
  });
  connection = createProtocolConnection(
    new StreamMessageReader(server.stdout!),
    new StreamMessageWriter(server.stdin!),
  );
  connection.onRequest(WorkDoneProgressCreateRequest.type, () => {});
  connection.listen();
  const init = await connection.sendRequest(InitializeRequest.type, {
    processId: process.pid,
    rootUri: null,
    capabilities: {
      textDocument: { inlineCompletion: {}, synchronization: {} },
      window: { workDoneProgress: true },
    },
    initializationOptions: {
      fastModelPath: join(model, "fast"),
      standardModelPath: join(model, "standard"),
      debounceMs: 0,
      preloadStandard: true, // the tests below use both models (else the wait below times out)
    },
  });
  assert.ok(init.capabilities.inlineCompletionProvider, "inline completion is advertised");
  await connection.sendNotification("initialized", {});
  for (let i = 0; i < 600; i++) {
    const stats = await connection.sendRequest(ExecuteCommandRequest.type, { command: "fastcomplete.stats" });
    if (stats.modelsReady && Object.keys(stats.kv_cache_bytes ?? {}).length === 2) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  await connection.sendNotification("textDocument/didOpen", {
    textDocument: { uri, languageId: "python", version: 1, text },
  });
});

after(async () => {
  await connection.sendRequest("shutdown");
  await connection.sendNotification("exit");
  connection.dispose();
  server.kill();
});

test("an inline completion comes back from the model", async () => {
  const result: any = await connection.sendRequest(InlineCompletionRequest.type, {
    textDocument: { uri },
    position: { line: 1, character: 21 },
    context: { triggerKind: 1 },
  });
  const items = Array.isArray(result) ? result : result.items;
  assert.ok(items.length > 0 && items[0].insertText.trim().length > 0);
  assert.equal(items[0].command.command, "fastcomplete.accepted");
  assert.deepEqual(items[0].range.start, { line: 1, character: 21 });
});

test("explain streams progress into the client's token", async () => {
  const reports: string[] = [];
  const token = "vscode-explain-1";
  const sub = connection.onProgress(WorkDoneProgress.type, token, (value) => {
    if (value.kind === "report" && value.message) reports.push(value.message);
  });
  const result = await connection.sendRequest(ExecuteCommandRequest.type, {
    command: "fastcomplete.explain",
    arguments: [{ uri, range: { start: { line: 0, character: 0 }, end: { line: 1, character: 21 } } }],
    workDoneToken: token,
  });
  sub.dispose();
  assert.equal(result.model, "smollm2-135m/standard");
  assert.ok(reports.length >= 2, "the explanation was streamed");
  assert.equal(reports.at(-1), result.markdown);
});

test("toggle fast mode answers the new state", async () => {
  const toggled = await connection.sendRequest(ExecuteCommandRequest.type, { command: "fastcomplete.toggleFastMode" });
  assert.deepEqual(toggled, { fastMode: false });
});
