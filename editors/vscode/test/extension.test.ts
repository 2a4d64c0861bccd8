// The extension with the `vscode` module (and the language client) replaced by recording fakes.
import { strict as assert } from "node:assert";
import * as fs from "node:fs";
import Module from "node:module";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";

const calls: {
  commands: Map<string, (...a: any[]) => any>;
  requests: any[];
  updates: any[];
  notifications: [string, any][];
} = {
  commands: new Map(),
  requests: [],
  updates: [],
  notifications: [],
};
const notificationHandlers = new Map<string, (params: any) => void>();
const selectionListeners: ((e: any) => void)[] = [];
const activeEditorListeners: ((e: any) => void)[] = [];
const editListeners: ((e: any) => void)[] = [];
const editor = (uri: string, line: number, character: number) => ({
  selection: { isEmpty: true, active: { line, character } },
  document: { uri: { scheme: uri.split(":")[0], toString: () => uri } },
});
const focuses = () => calls.notifications.filter(([method]) => method === "fastcomplete/didFocus");
let progressHandler: ((value: any) => void) | undefined;
const statusItem = { text: "", tooltip: "", command: "", show() {}, dispose() {} };
const pageEvents: string[] = [];
let provider: any;

class EventEmitter<T> {
  listeners: ((v: T) => void)[] = [];
  event = (l: (v: T) => void) => this.listeners.push(l);
  fire(v: T) {
    pageEvents.push(String(v));
    this.listeners.forEach((l) => l(v));
  }
}

const fakeVscode = {
  EventEmitter,
  StatusBarAlignment: { Right: 2 },
  ConfigurationTarget: { Global: 1 },
  Uri: { parse: (s: string) => ({ toString: () => s }) },
  workspace: {
    getConfiguration: () => ({
      get: (key: string) => ({ fastMode: true, maxTokens: 48, serverPath: "fastcomplete" })[key],
      update: async (key: string, value: unknown) => calls.updates.push([key, value]),
    }),
    registerTextDocumentContentProvider: (_scheme: string, p: any) => ((provider = p), { dispose() {} }),
    openTextDocument: async (d: any) => d,
    onDidChangeTextDocument: (l: any) => (editListeners.push(l), { dispose() {} }),
  },
  window: {
    createStatusBarItem: () => statusItem,
    showInformationMessage: () => undefined,
    showTextDocument: async () => undefined,
    onDidChangeTextEditorSelection: (l: any) => (selectionListeners.push(l), { dispose() {} }),
    onDidChangeActiveTextEditor: (l: any) => (activeEditorListeners.push(l), { dispose() {} }),
    activeTextEditor: {
      selection: { isEmpty: false, active: { line: 1, character: 4 } },
      document: {
        getText: () => "def f():\n    return 1",
        languageId: "python",
        uri: { scheme: "file", toString: () => "file:///f.py" },
      },
    },
  },
  commands: {
    registerCommand: (name: string, fn: any) => (calls.commands.set(name, fn), { dispose() {} }),
    executeCommand: async () => undefined,
  },
};

class FakeClient {
  options: any;
  code2ProtocolConverter = {
    asRange: () => ({ start: { line: 0, character: 0 }, end: { line: 1, character: 12 } }),
    asUri: (uri: any) => uri.toString(),
    asPosition: (p: any) => ({ line: p.line, character: p.character }),
  };
  constructor(_id: string, _name: string, server: any, options: any) {
    this.options = { server, ...options };
    fakeClient = this;
  }
  async start() {}
  async stop() {}
  onNotification(method: string, handler: (params: any) => void) {
    notificationHandlers.set(method, handler);
    return { dispose() {} };
  }
  async sendNotification(method: string, params: any) {
    calls.notifications.push([method, params]);
  }
  onProgress(_type: unknown, _token: string, handler: (v: any) => void) {
    progressHandler = handler;
    return { dispose() {} };
  }
  async sendRequest(_type: unknown, params: any) {
    calls.requests.push(params);
    if (params.command === "fastcomplete.toggleFastMode") return { fastMode: false };
    if (params.command === "fastcomplete.explain") {
      progressHandler?.({ kind: "report", message: "It returns" });
      progressHandler?.({ kind: "report", message: "It returns 1." });
      return { markdown: "It returns 1.", model: "m/standard" };
    }
    return {};
  }
}
let fakeClient: FakeClient | undefined;

const load = (Module as any)._load;
(Module as any)._load = function (request: string, ...rest: unknown[]) {
  if (request === "vscode") return fakeVscode;
  if (request === "vscode-languageclient/node") {
    return { LanguageClient: FakeClient, ExecuteCommandRequest: { type: "exec" }, WorkDoneProgress: { type: "progress" } };
  }
  return load.call(this, request, ...rest);
};

test("activate starts the server with the settings and shows the mode", async () => {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const ext: typeof import("../src/extension") = require("../src/extension");
  // `fastcomplete` on PATH, as `uv tool install` or a virtual environment puts it there.
  const bin = fs.mkdtempSync(path.join(os.tmpdir(), "fastcomplete-bin-"));
  fs.writeFileSync(path.join(bin, "fastcomplete"), "#!/bin/sh\n", { mode: 0o755 });
  process.env.PATH = `${bin}${path.delimiter}${process.env.PATH ?? ""}`;
  await ext.activate({ subscriptions: [] } as any);
  assert.deepEqual(fakeClient?.options.server, { command: path.join(bin, "fastcomplete"), args: ["serve"] });
  assert.equal(fakeClient?.options.initializationOptions.maxTokens, 48);
  assert.equal(fakeClient?.options.synchronize.configurationSection, "fastcomplete");
  assert.deepEqual(fakeClient?.options.documentSelector, [{ scheme: "file" }, { scheme: "untitled" }]);
  assert.equal(statusItem.text, "$(sync~spin) fastcomplete"); // nothing heard from the server yet
  // The cursor of the editor open at startup is told at once.
  assert.deepEqual(focuses(), [
    ["fastcomplete/didFocus", { textDocument: { uri: "file:///f.py" }, position: { line: 1, character: 4 } }],
  ]);
  for (const name of ["fastcomplete.explainSelection", "fastcomplete.toggleFastModeClient", "fastcomplete.showStats"]) {
    assert.ok(calls.commands.has(name), name);
  }
});

test("the status bar follows fastcomplete/status", () => {
  const onStatus = notificationHandlers.get("fastcomplete/status")!;
  onStatus({ state: "loading", message: "loading models", fastMode: true });
  assert.equal(statusItem.text, "$(sync~spin) fastcomplete");
  assert.equal(statusItem.tooltip, "loading models");
  onStatus({ state: "ready", message: "fast model ready", fastMode: true });
  assert.equal(statusItem.text, "$(zap) fast");
  assert.match(statusItem.tooltip, /click to switch/);
  assert.equal(statusItem.command, "fastcomplete.toggleFastModeClient");
});

test("selection changes send didFocus once the cursor rests", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  calls.notifications.length = 0;
  const move = (uri: string, line: number, character: number) =>
    selectionListeners.forEach((l) => l({ textEditor: editor(uri, line, character) }));
  move("file:///a.py", 3, 1);
  t.mock.timers.tick(100);
  move("file:///a.py", 3, 2); // still moving: the wait starts again
  t.mock.timers.tick(149);
  assert.deepEqual(focuses(), []);
  t.mock.timers.tick(1);
  assert.deepEqual(focuses(), [
    ["fastcomplete/didFocus", { textDocument: { uri: "file:///a.py" }, position: { line: 3, character: 2 } }],
  ]);
  move("output:extension-output-1", 0, 0); // not a document the server has
  t.mock.timers.tick(1000);
  assert.equal(focuses().length, 1);
});

test("switching editors sends didFocus at once", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  calls.notifications.length = 0;
  selectionListeners.forEach((l) => l({ textEditor: editor("file:///a.py", 9, 9) }));
  activeEditorListeners.forEach((l) => l(editor("untitled:Untitled-1", 0, 5)));
  assert.deepEqual(focuses(), [
    ["fastcomplete/didFocus", { textDocument: { uri: "untitled:Untitled-1" }, position: { line: 0, character: 5 } }],
  ]);
  t.mock.timers.tick(1000); // the older, pending move is not sent after the switch
  assert.equal(focuses().length, 1);
  activeEditorListeners.forEach((l) => l(undefined)); // no editor left: nothing to tell
  assert.equal(focuses().length, 1);
});

test("inline completions go through a middleware that records latency", async () => {
  const middleware = fakeClient!.options.middleware.provideInlineCompletionItems;
  const doc = { uri: { toString: () => "file:///x.py" } };
  const result = await middleware(doc, { line: 0, character: 0 }, {}, {}, async () => ({ items: [{ insertText: "x" }] }));
  assert.deepEqual(result, { items: [{ insertText: "x" }] });
  assert.match(statusItem.text, /^\$\(zap\) fast \d+ ms$/);
});

test("an accept-word of a shown item is forwarded with where and what", async () => {
  const middleware = fakeClient!.options.middleware.provideInlineCompletionItems;
  const doc = { uri: { toString: () => "file:///a.py" } };
  const pos = { line: 2, character: 8 };
  await middleware(doc, pos, {}, {}, async () => [{ insertText: "total = 0\nreturn total" }]);
  calls.notifications.length = 0;
  const edit = (character: number, text: string) =>
    editListeners.forEach((l) =>
      l({
        document: doc,
        contentChanges: [{ range: { start: { line: 2, character } }, rangeLength: 0, text }],
      }),
    );
  edit(8, "t"); // typed: not an acceptance
  edit(8, "total "); // accept word
  edit(14, "= 0\n"); // then accept line, from where the word ended
  const sent = calls.notifications.filter(([m]) => m === "fastcomplete/didPartiallyAccept").map(([, p]) => p);
  assert.deepEqual(sent, [
    {
      textDocument: { uri: "file:///a.py" },
      position: { line: 2, character: 8 },
      acceptedLength: 6,
      kind: "word",
      text: "total ",
    },
    {
      textDocument: { uri: "file:///a.py" },
      position: { line: 2, character: 14 },
      acceptedLength: 4,
      kind: "line",
      text: "= 0\n",
    },
  ]);
});

test("clicking the status bar toggles fast mode", async () => {
  const fast = await calls.commands.get("fastcomplete.toggleFastModeClient")!();
  assert.equal(fast, false);
  assert.equal(statusItem.text, "$(beaker) standard");
  assert.deepEqual(calls.updates.at(-1), ["fastMode", false]);
});

test("explain streams into the markdown page", async () => {
  const markdown = await calls.commands.get("fastcomplete.explainSelection")!();
  assert.equal(markdown, "It returns 1.");
  const request = calls.requests.find((r) => r.command === "fastcomplete.explain");
  assert.match(request.workDoneToken, /^fastcomplete-explain-/);
  assert.equal(request.arguments[0].uri, "file:///f.py");
  assert.ok(pageEvents.length >= 4); // empty page, two reports, the final text
  const page = provider.provideTextDocumentContent({ toString: () => pageEvents.at(-1) });
  assert.match(page, /It returns 1\./);
  assert.doesNotMatch(page, /generating/);
});

test("a server that could load no model shows an error", () => {
  const onStatus = notificationHandlers.get("fastcomplete/status")!;
  onStatus({ state: "error", message: "fast model: missing; standard model: missing", fastMode: false });
  assert.equal(statusItem.text, "$(error) fastcomplete");
  assert.match(statusItem.tooltip, /standard model: missing/);
});
