// The extension with the `vscode` module (and the language client) replaced by recording fakes.
import { strict as assert } from "node:assert";
import Module from "node:module";
import { test } from "node:test";

const calls: { commands: Map<string, (...a: any[]) => any>; requests: any[]; updates: any[] } = {
  commands: new Map(),
  requests: [],
  updates: [],
};
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
  },
  window: {
    createStatusBarItem: () => statusItem,
    showInformationMessage: () => undefined,
    showTextDocument: async () => undefined,
    activeTextEditor: {
      selection: { isEmpty: false },
      document: { getText: () => "def f():\n    return 1", languageId: "python", uri: { toString: () => "file:///f.py" } },
    },
  },
  commands: {
    registerCommand: (name: string, fn: any) => (calls.commands.set(name, fn), { dispose() {} }),
    executeCommand: async () => undefined,
  },
};

class FakeClient {
  options: any;
  code2ProtocolConverter = { asRange: () => ({ start: { line: 0, character: 0 }, end: { line: 1, character: 12 } }) };
  constructor(_id: string, _name: string, server: any, options: any) {
    this.options = { server, ...options };
    fakeClient = this;
  }
  async start() {}
  async stop() {}
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
  await ext.activate({ subscriptions: [] } as any);
  assert.deepEqual(fakeClient?.options.server, { command: "fastcomplete", args: ["serve"] });
  assert.equal(fakeClient?.options.initializationOptions.maxTokens, 48);
  assert.equal(fakeClient?.options.synchronize.configurationSection, "fastcomplete");
  assert.equal(statusItem.text, "$(zap) fast");
  for (const name of ["fastcomplete.explainSelection", "fastcomplete.toggleFastModeClient", "fastcomplete.showStats"]) {
    assert.ok(calls.commands.has(name), name);
  }
});

test("inline completions go through a middleware that records latency", async () => {
  const middleware = fakeClient!.options.middleware.provideInlineCompletionItems;
  const result = await middleware({}, {}, {}, {}, async () => ({ items: [{ insertText: "x" }] }));
  assert.deepEqual(result, { items: [{ insertText: "x" }] });
  assert.match(statusItem.text, /^\$\(zap\) fast \d+ ms$/);
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
