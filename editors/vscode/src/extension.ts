// The VS Code client: starts `fastcomplete serve`, lets VS Code's LSP 3.18 support drive inline
// completions, and adds a status bar item, Explain Selection, Toggle Fast Mode and Show Stats.
// Tells the server where the cursor rests (fastcomplete/didFocus) so it can warm the prompt
// before the next keystroke, and shows its state (fastcomplete/status) in the status bar.
import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  WorkDoneProgress,
} from "vscode-languageclient/node";
import {
  Debouncer,
  explanationPage,
  FOCUS_DEBOUNCE_MS,
  findServer,
  INSTALL_COMMAND,
  isSynced,
  needsModel,
  partialAcceptance,
  Shown,
  SYNCED_SCHEMES,
  ServerState,
  settingsFrom,
  statusView,
} from "./logic";

let client: LanguageClient | undefined;
let status: vscode.StatusBarItem | undefined;
let fastMode = true;
let lastLatency: number | undefined;
// Until the server's first fastcomplete/status: it is starting, nothing can complete yet.
let serverState: ServerState = "loading";
let stateMessage = "fastcomplete: starting the server";
// The server's command line, once found; and whether building a model was offered already.
let server: { command: string; args: string[] } | undefined;
let buildOffered = false;

const DID_FOCUS = "fastcomplete/didFocus";
const DID_PARTIALLY_ACCEPT = "fastcomplete/didPartiallyAccept";
const STATUS = "fastcomplete/status";
// The items last shown, to recognise an accept-word / accept-line in the edit that follows.
let shown: Shown | undefined;

const EXPLAIN_SCHEME = "fastcomplete-explain";
const pages = new Map<string, string>();
const pageChanged = new vscode.EventEmitter<vscode.Uri>();

function config(): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration("fastcomplete");
}

function refreshStatus(): void {
  if (status) {
    const view = statusView(serverState, fastMode, lastLatency, stateMessage);
    status.text = view.text;
    status.tooltip = view.tooltip;
  }
}

function onStatus(params: { state: ServerState; message?: string; fastMode?: boolean }): void {
  serverState = params.state;
  stateMessage = params.message ?? "";
  if (typeof params.fastMode === "boolean") {
    fastMode = params.fastMode; // the server's settings win: they say which model completes
  }
  refreshStatus();
  const ownModels = config().get("fastModelPath") || config().get("standardModelPath");
  if (needsModel(serverState, stateMessage) && !ownModels && !buildOffered && server) {
    buildOffered = true; // one notification per window, however often the status repeats
    void offerBuild(server);
  }
}

function isFile(file: string): boolean {
  try {
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

async function copyable(show: typeof vscode.window.showErrorMessage, text: string, command: string) {
  if ((await show(text, "Copy command")) === "Copy command") {
    await vscode.env.clipboard.writeText(command);
  }
}

/** No server to start: say what to run, once. */
function notifyMissing(): void {
  serverState = "error";
  stateMessage = `fastcomplete is not installed: run \`${INSTALL_COMMAND}\``;
  refreshStatus();
  void copyable(
    vscode.window.showErrorMessage,
    `fastcomplete: the server is not installed (not on PATH, not in ~/.local/bin, not at ` +
      `fastcomplete.serverPath). Install it: in the fastcomplete repository, \`make dist\`, then ` +
      `\`${INSTALL_COMMAND}\` (or pipx install), then reload the window.`,
    INSTALL_COMMAND,
  );
}

/** The server has no model: with the person's consent, build it, progress in the status bar. */
async function offerBuild(found: { command: string; args: string[] }): Promise<void> {
  const choice = await vscode.window.showInformationMessage(
    "fastcomplete: no model is built yet. Build it now? It downloads the model from PyPI " +
      "(about 0.5 GB) and, the first time, the tools that build it (a few GB); several minutes.",
    "Build model",
    "Not now",
  );
  if (choice !== "Build model") {
    return;
  }
  const args = [...found.args.slice(0, -1), "models", "build", "--install-build-env", "--quiet"];
  const code = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title: "fastcomplete: building the model" },
    (progress) =>
      new Promise<number | null>((resolve) => {
        const child = spawn(found.command, args, { env: process.env });
        const report = (chunk: Buffer) => {
          const line = chunk.toString().trim().split(/\r?\n|\r/).pop();
          if (line) {
            progress.report({ message: line.slice(0, 80) });
          }
        };
        child.stdout.on("data", report);
        child.stderr.on("data", report);
        child.on("error", () => resolve(null));
        child.on("close", resolve);
      }),
  );
  if (code === 0) {
    vscode.window.showInformationMessage("fastcomplete: the model is built; restarting the server");
    await client?.restart();
  } else {
    const command = [found.command, ...args.slice(0, -2)].join(" ");
    await copyable(
      vscode.window.showErrorMessage,
      `fastcomplete: building the model failed (exit ${code}): run \`${command}\` in a terminal to see why`,
      command,
    );
  }
}

function remember(
  document: vscode.TextDocument,
  position: vscode.Position,
  context: vscode.InlineCompletionContext,
  items: vscode.InlineCompletionItem[],
): void {
  const start = items[0].range?.start ?? position;
  const end = items[0].range?.end ?? position;
  shown = {
    uri: document.uri.toString(),
    line: start.line,
    character: start.character,
    replaced: end.character - start.character,
    selected: context.selectedCompletionInfo?.text.length ?? 0,
    texts: items.map((item) => (typeof item.insertText === "string" ? item.insertText : item.insertText.value)),
  };
}

/** Forward an accept-word / accept-line of our suggestion to the server (local stats). */
function onEdit(event: vscode.TextDocumentChangeEvent): void {
  if (!shown || event.document.uri.toString() !== shown.uri) {
    return;
  }
  for (const change of event.contentChanges) {
    const accepted = partialAcceptance(shown, event.document.uri.toString(), {
      line: change.range.start.line,
      character: change.range.start.character,
      rangeLength: change.rangeLength,
      text: change.text,
    });
    if (!accepted) {
      continue;
    }
    const position = { line: shown.line, character: shown.character };
    shown = accepted.next;
    client
      ?.sendNotification(DID_PARTIALLY_ACCEPT, {
        textDocument: { uri: client.code2ProtocolConverter.asUri(event.document.uri) },
        position,
        acceptedLength: accepted.text.length,
        kind: accepted.kind,
        text: accepted.text,
      })
      .catch(() => undefined); // only counting: a stopped client has nobody to tell
    return;
  }
}

/** Tell the server where the cursor of `editor` is, so it warms the prompt there. */
function sendFocus(editor: vscode.TextEditor): void {
  if (!client || !isSynced(editor.document.uri.scheme)) {
    return;
  }
  const c2p = client.code2ProtocolConverter;
  client
    .sendNotification(DID_FOCUS, {
      textDocument: { uri: c2p.asUri(editor.document.uri) },
      position: c2p.asPosition(editor.selection.active),
    })
    .catch(() => undefined); // only a hint: a stopped client just has nobody to tell
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const settings = settingsFrom((key) => config().get(key));
  fastMode = settings.fastMode !== false;
  const found = findServer(
    config().get<string>("serverPath"),
    process.env.PATH ?? "",
    os.homedir(),
    isFile,
    path.delimiter,
  );
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = "fastcomplete.toggleFastModeClient";
  context.subscriptions.push(status);
  status.show();
  if (found === undefined) {
    notifyMissing();
    return;
  }
  server = found;
  const serverOptions: ServerOptions = { command: server.command, args: server.args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: SYNCED_SCHEMES.map((scheme) => ({ scheme })),
    // The build offer below is the one notification for a model not built yet.
    initializationOptions: { ...settings, offersModelBuild: true },
    synchronize: { configurationSection: "fastcomplete" },
    middleware: {
      provideInlineCompletionItems: async (document, position, ctx, token, next) => {
        const started = Date.now();
        const result = await next(document, position, ctx, token);
        const items = Array.isArray(result) ? result : result?.items;
        if (items && items.length > 0) {
          lastLatency = Date.now() - started;
          refreshStatus();
          remember(document, position, ctx, items);
        }
        return result;
      },
    },
  };
  client = new LanguageClient("fastcomplete", "fastcomplete", serverOptions, clientOptions);
  client.onNotification(STATUS, onStatus);
  const focus = new Debouncer<vscode.TextEditor>(FOCUS_DEBOUNCE_MS, sendFocus);

  refreshStatus();

  context.subscriptions.push(
    vscode.workspace.registerTextDocumentContentProvider(EXPLAIN_SCHEME, {
      onDidChange: pageChanged.event,
      provideTextDocumentContent: (uri) => pages.get(uri.toString()) ?? "",
    }),
    vscode.commands.registerCommand("fastcomplete.toggleFastModeClient", toggleFastMode),
    vscode.commands.registerCommand("fastcomplete.explainSelection", explainSelection),
    vscode.commands.registerCommand("fastcomplete.showStats", showStats),
    focus,
    vscode.window.onDidChangeTextEditorSelection((event) => focus.schedule(event.textEditor)),
    vscode.workspace.onDidChangeTextDocument(onEdit),
    // Switching editors is a deliberate move: the cursor is already where the user will type.
    vscode.window.onDidChangeActiveTextEditor((editor) => editor && focus.now(editor)),
  );
  try {
    await client.start();
  } catch (err) {
    onStatus({ state: "error", message: `fastcomplete: the server did not start: ${err}` });
    throw err;
  }
  if (vscode.window.activeTextEditor) {
    focus.now(vscode.window.activeTextEditor); // the cursor a restored window opened with
  }
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}

async function run(command: string, args: unknown[], workDoneToken?: string): Promise<any> {
  if (!client) {
    throw new Error("fastcomplete: the server is not running");
  }
  return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args, workDoneToken });
}

export async function toggleFastMode(): Promise<boolean> {
  const result = await run("fastcomplete.toggleFastMode", []);
  fastMode = Boolean(result.fastMode);
  lastLatency = undefined;
  await config().update("fastMode", fastMode, vscode.ConfigurationTarget.Global);
  refreshStatus();
  return fastMode;
}

export async function showStats(): Promise<void> {
  const stats = await run("fastcomplete.stats", []);
  const doc = await vscode.workspace.openTextDocument({
    language: "json",
    content: JSON.stringify(stats, null, 2),
  });
  await vscode.window.showTextDocument(doc, { preview: true });
}

/** Explain the selection: a markdown view that fills in while the explanation streams. */
export async function explainSelection(): Promise<string | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || !client || editor.selection.isEmpty) {
    vscode.window.showInformationMessage("fastcomplete: select some code to explain");
    return undefined;
  }
  const code = editor.document.getText(editor.selection);
  const language = editor.document.languageId;
  const token = `fastcomplete-explain-${Date.now()}`;
  const page = vscode.Uri.parse(`${EXPLAIN_SCHEME}:explanation-${Date.now()}.md`);
  const show = (text: string, done: boolean) => {
    pages.set(page.toString(), explanationPage(code, language, text, done));
    pageChanged.fire(page);
  };
  show("", false);
  await vscode.commands.executeCommand("markdown.showPreviewToSide", page);
  const listener = client.onProgress(WorkDoneProgress.type, token, (value) => {
    if (value.kind === "report" && value.message) {
      show(value.message, false);
    }
  });
  try {
    const range = client.code2ProtocolConverter.asRange(editor.selection);
    const result = await run(
      "fastcomplete.explain",
      [{ uri: editor.document.uri.toString(), range }],
      token,
    );
    show(result.markdown, true);
    return result.markdown;
  } finally {
    listener.dispose();
  }
}
