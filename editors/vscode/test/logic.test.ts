import { strict as assert } from "node:assert";
import { test } from "node:test";
import { explanationPage, serverCommand, settingsFrom, statusText } from "../src/logic";

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

test("status bar shows mode and latency", () => {
  assert.equal(statusText(true, undefined), "$(zap) fast");
  assert.equal(statusText(false, 123.4), "$(beaker) standard 123 ms");
});

test("explanation page marks unfinished text", () => {
  assert.match(explanationPage("x = 1", "python", "Sets x", false), /generating/);
  assert.doesNotMatch(explanationPage("x = 1", "python", "Sets x", true), /generating/);
});
