import { strict as assert } from "node:assert";
import { test } from "node:test";
import {
  Debouncer,
  explanationPage,
  findServer,
  isSynced,
  needsModel,
  partialAcceptance,
  serverCommand,
  settingsFrom,
  statusText,
  statusView,
  TOGGLE_TOOLTIP,
} from "../src/logic";

test("settings mirror the server's section and skip unset keys", () => {
  const values: Record<string, unknown> = { fastMode: false, maxTokens: 32, serverPath: "x" };
  assert.deepEqual(settingsFrom((k) => values[k]), { fastMode: false, maxTokens: 32 });
});

test("server command appends serve", () => {
  assert.deepEqual(serverCommand(undefined), { command: "fastcomplete", args: ["serve"] });
  assert.deepEqual(serverCommand("/venv/bin/python -m lsp_server.cli"), {
    command: "/venv/bin/python",
    args: ["-m", "lsp_server.cli", "serve"],
  });
});

test("the server is found on PATH, then in ~/.local/bin, then where configured", () => {
  const files = new Set([
    "/venv/bin/fastcomplete",
    "/home/me/.local/bin/fastcomplete",
    "/opt/fc",
    "/home/Jo Doe/.local/bin/fastcomplete",
  ]);
  const isFile = (p: string) => files.has(p);
  const serve = (command: string) => ({ command, args: ["serve"] });
  assert.deepEqual(findServer(undefined, "/usr/bin:/venv/bin", "/home/me", isFile), serve("/venv/bin/fastcomplete"));
  assert.deepEqual(findServer("fastcomplete", "/usr/bin", "/home/me", isFile), serve("/home/me/.local/bin/fastcomplete"));
  assert.equal(findServer(undefined, "/usr/bin", "/nobody", isFile), undefined);
  // A path with a space is one path, not a command line.
  assert.deepEqual(findServer(undefined, "", "/home/Jo Doe", isFile), serve("/home/Jo Doe/.local/bin/fastcomplete"));
  // A path the person set is theirs: it wins when it exists.
  assert.deepEqual(findServer("/opt/fc", "/venv/bin", "/home/me", isFile), serve("/opt/fc"));
  assert.deepEqual(findServer("/missing/fc", "/venv/bin", "/home/me", isFile), serve("/venv/bin/fastcomplete"));
  assert.deepEqual(findServer("python -m lsp_server.cli", "", "/x", isFile), {
    command: "python",
    args: ["-m", "lsp_server.cli", "serve"],
  });
});

test("a status naming `models build` offers to build the model", () => {
  assert.ok(needsModel("error", "fast model: not built: run `fastcomplete models build`"));
  assert.ok(!needsModel("error", "the fast model failed"));
  assert.ok(!needsModel("ready", "models build"));
});

test("status bar shows mode and latency", () => {
  assert.equal(statusText(true, undefined), "$(zap) fast");
  assert.equal(statusText(false, 123.4), "$(beaker) standard 123 ms");
});

test("status bar follows the server's state", () => {
  assert.deepEqual(statusView("loading", true, undefined, "loading models"), {
    text: "$(sync~spin) fastcomplete",
    tooltip: "loading models",
  });
  assert.deepEqual(statusView("ready", false, 87, "fast model ready"), {
    text: "$(beaker) standard 87 ms",
    tooltip: TOGGLE_TOOLTIP,
  });
  const error = statusView("error", true, 87, "fast model: missing model.onnx");
  assert.equal(error.text, "$(error) fastcomplete");
  assert.match(error.tooltip, /missing model\.onnx/);
});

test("focus is sent only for documents the client syncs", () => {
  assert.ok(isSynced("file") && isSynced("untitled"));
  assert.ok(!isSynced("output") && !isSynced("git"));
});

test("debouncer fires once, for the last value, after the wait", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const fired: number[] = [];
  const debounce = new Debouncer<number>(150, (v) => fired.push(v));
  debounce.schedule(1);
  t.mock.timers.tick(100);
  debounce.schedule(2); // a move before the wait is over starts it again
  t.mock.timers.tick(100);
  assert.deepEqual(fired, []);
  t.mock.timers.tick(50);
  assert.deepEqual(fired, [2]);
  t.mock.timers.tick(1000);
  assert.deepEqual(fired, [2]);
});

test("debouncer: now fires at once and drops the pending value", (t) => {
  t.mock.timers.enable({ apis: ["setTimeout"] });
  const fired: string[] = [];
  const debounce = new Debouncer<string>(150, (v) => fired.push(v));
  debounce.schedule("old editor");
  debounce.now("new editor");
  assert.deepEqual(fired, ["new editor"]);
  t.mock.timers.tick(1000);
  assert.deepEqual(fired, ["new editor"]);
  debounce.schedule("later");
  debounce.dispose();
  t.mock.timers.tick(1000);
  assert.deepEqual(fired, ["new editor"]);
});

test("explanation page marks unfinished text", () => {
  assert.match(explanationPage("x = 1", "python", "Sets x", false), /generating/);
  assert.doesNotMatch(explanationPage("x = 1", "python", "Sets x", true), /generating/);
});

test("a partial accept is a prefix of a shown item inserted where it starts", () => {
  const shown = { uri: "u", line: 1, character: 4, replaced: 0, selected: 0, texts: ["return a + b", "return a"] };
  const at = (character: number, text: string, rangeLength = 0) => ({ line: 1, character, rangeLength, text });
  const word = partialAcceptance(shown, "u", at(4, "return "));
  assert.equal(word?.kind, "word");
  assert.deepEqual(word?.next, { uri: "u", line: 1, character: 11, replaced: 0, selected: 0, texts: ["a + b", "a"] });
  assert.equal(partialAcceptance(shown, "u", at(4, "r")), undefined); // one typed character
  assert.equal(partialAcceptance(shown, "u", at(4, "return a + b")), undefined); // whole: its command says so
  assert.equal(partialAcceptance(shown, "u", at(5, "eturn")), undefined); // not where it starts
  assert.equal(partialAcceptance(shown, "other", at(4, "return ")), undefined);
  assert.equal(partialAcceptance(shown, "u", at(4, "yield ")), undefined);
  const brackets = { ...shown, texts: ["()\n"] };
  assert.equal(partialAcceptance(brackets, "u", at(4, "()")), undefined); // an auto-closed pair
});

test("after a suggest item, a partial accept replaces the typed prefix; lines end in line kind", () => {
  const shown = {
    uri: "u",
    line: 0,
    character: 10,
    replaced: 2,
    selected: 10,
    texts: ["session_id = new_id()\nreturn x"],
  };
  const line = partialAcceptance(shown, "u", { line: 0, character: 10, rangeLength: 2, text: "session_id = new_id()\n" });
  assert.equal(line?.kind, "line");
  assert.deepEqual(line?.next, { uri: "u", line: 1, character: 0, replaced: 0, selected: 0, texts: ["return x"] });
  assert.equal(partialAcceptance(shown, "u", { line: 0, character: 10, rangeLength: 0, text: "session" }), undefined);
  // Tab on the widget's item puts its text there: the widget's, not an accept of ours.
  const item = { line: 0, character: 10, rangeLength: 2, text: "session_id" };
  assert.equal(partialAcceptance(shown, "u", item), undefined);
  const word = partialAcceptance(shown, "u", { ...item, text: "session_id = " });
  assert.equal(word?.kind, "word");
});
