// Plain functions behind the extension (no `vscode` import): unit-tested directly.

export const SETTING_KEYS = [
  "fastMode",
  "enable",
  "languages",
  "maxTokens",
  "multiline",
  "debounceMs",
  "contextTokens",
] as const;

export type Settings = Record<(typeof SETTING_KEYS)[number], unknown>;

/** The server's `fastcomplete` settings section from the editor's configuration. */
export function settingsFrom(get: (key: string) => unknown): Partial<Settings> {
  const out: Partial<Settings> = {};
  for (const key of SETTING_KEYS) {
    const value = get(key);
    if (value !== undefined) {
      out[key] = value;
    }
  }
  return out;
}

/** How to start the server: a path or a name on PATH, plus `serve`. */
export function serverCommand(serverPath: string | undefined): { command: string; args: string[] } {
  const parts = (serverPath || "fastcomplete").trim().split(/\s+/);
  return { command: parts[0], args: [...parts.slice(1), "serve"] };
}

export const SERVER_NAME = "fastcomplete";
/** What a person runs to get the server, in the repository after `make dist` (README, Install). */
export const INSTALL_COMMAND = "uv tool install dist/fastcomplete-0.1.0-py3-none-any.whl";

/**
 * The server's executable: `fastcomplete` on PATH, then where `uv tool` and `pipx` put it
 * (~/.local/bin, often missing from a desktop-launched editor's PATH), then the configured
 * `serverPath`. A serverPath the person set (anything but the default name) is theirs and comes
 * first. Undefined when none exists.
 */
export function findServer(
  serverPath: string | undefined,
  pathEnv: string,
  home: string,
  isFile: (path: string) => boolean,
  sep = ":",
): { command: string; args: string[] } | undefined {
  const configured = (serverPath ?? "").trim();
  const explicit = configured !== "" && configured !== SERVER_NAME;
  const program = configured.split(/\s+/)[0];
  if (explicit && (isFile(configured) || isFile(program) || !program.includes("/"))) {
    // A path that exists (spaces and all), or a command line / name the person chose.
    return isFile(configured) ? { command: configured, args: ["serve"] } : serverCommand(configured);
  }
  const dirs = pathEnv.split(sep).filter((d) => d !== "");
  for (const dir of [...dirs, `${home}/.local/bin`]) {
    const candidate = `${dir}/${SERVER_NAME}`;
    if (isFile(candidate)) {
      return { command: candidate, args: ["serve"] }; // a path: never split at its spaces
    }
  }
  return undefined;
}

/** The server's status says its model is not built: what the person can be offered. */
export function needsModel(state: ServerState, message: string): boolean {
  return state === "error" && message.includes("models build");
}

/** The status bar: which model completes, and how long the last completion took. */
export function statusText(fastMode: boolean, lastLatencyMs: number | undefined): string {
  const mode = fastMode ? "$(zap) fast" : "$(beaker) standard";
  return lastLatencyMs === undefined ? mode : `${mode} ${Math.round(lastLatencyMs)} ms`;
}

/** The server's state, as its `fastcomplete/status` notification tells it. */
export type ServerState = "loading" | "ready" | "error";

export const TOGGLE_TOOLTIP = "fastcomplete: click to switch between the fast and the standard model";

/** The status bar item for a server state: only a ready server has a mode worth showing. */
export function statusView(
  state: ServerState,
  fastMode: boolean,
  lastLatencyMs: number | undefined,
  message: string,
): { text: string; tooltip: string } {
  if (state === "loading") {
    return { text: "$(sync~spin) fastcomplete", tooltip: message };
  }
  if (state === "error") {
    return { text: "$(error) fastcomplete", tooltip: message };
  }
  return { text: statusText(fastMode, lastLatencyMs), tooltip: TOGGLE_TOOLTIP };
}

/** Documents the language client syncs to the server: a focus elsewhere would name a document
 * the server never saw. */
export const SYNCED_SCHEMES = ["file", "untitled"];

export function isSynced(scheme: string): boolean {
  return SYNCED_SCHEMES.includes(scheme);
}

/** How long the cursor must rest before the server is told (fastcomplete/didFocus): moving
 * through a file should not make it warm a prompt at every line passed. */
export const FOCUS_DEBOUNCE_MS = 150;

/** Calls `fire` `delayMs` after the last `schedule`; each `schedule` restarts the wait. */
export class Debouncer<T> {
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly delayMs: number,
    private readonly fire: (value: T) => void,
  ) {}

  schedule(value: T): void {
    this.cancel();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.fire(value);
    }, this.delayMs);
  }

  /** Fire at once; a pending value is dropped, or it would land after this newer one. */
  now(value: T): void {
    this.cancel();
    this.fire(value);
  }

  cancel(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }

  dispose(): void {
    this.cancel();
  }
}

/** A markdown page for an explanation that is still streaming in. */
export function explanationPage(code: string, language: string, text: string, done: boolean): string {
  const fence = "```";
  const status = done ? "" : "\n\n*…generating*";
  return `## Explanation\n\n${fence}${language}\n${code}\n${fence}\n\n${text}${status}\n`;
}

/** The inline items last shown in a document: where they start and what each inserts. */
export interface Shown {
  uri: string;
  line: number;
  character: number;
  replaced: number; // characters of the document the items replace (a suggest item's prefix)
  selected: number; // characters at the start of each text that are the suggest widget's item
  texts: string[];
}

/** One edit, as VS Code reports it: the range it replaced and the text put there. */
export interface Edit {
  line: number;
  character: number;
  rangeLength: number;
  text: string;
}

export interface PartialAccept {
  kind: "word" | "line";
  text: string;
  /** What is still shown after it, anchored where the accepted part ends. */
  next: Shown;
}

// Typing an opening bracket or quote inserts its pair in one edit: that is typing, not
// accepting, even when the suggestion starts with the same two characters.
const AUTO_CLOSED = new Set(["()", "[]", "{}", '""', "''", "``"]);

/** Whether `edit` put part of a shown suggestion into the document: VS Code's accept-word and
 * accept-line insert a prefix of the item where it starts; the stable API does not tell the
 * provider (Copilot's handleDidPartiallyAcceptCompletionItem is a proposed API), so it is read
 * from the edit. A whole item is not partial (its command reports it), nor is one typed char,
 * nor the suggest widget's own item taken with Tab (the widget's text, not ours). */
export function partialAcceptance(shown: Shown | undefined, uri: string, edit: Edit): PartialAccept | undefined {
  if (!shown || shown.uri !== uri || edit.line !== shown.line || edit.character !== shown.character) {
    return undefined;
  }
  const tooShort = edit.text.length < Math.max(2, shown.selected + 1);
  if (edit.rangeLength !== shown.replaced || tooShort || AUTO_CLOSED.has(edit.text)) {
    return undefined;
  }
  const texts = shown.texts.filter((t) => t.length > edit.text.length && t.startsWith(edit.text));
  if (texts.length === 0) {
    return undefined;
  }
  const lines = edit.text.split("\n");
  const rest = texts[0].slice(edit.text.length);
  const kind = edit.text.includes("\n") || (rest.startsWith("\n") && /\S\s+\S/.test(edit.text)) ? "line" : "word";
  const last = lines[lines.length - 1];
  const next: Shown = {
    uri,
    line: shown.line + lines.length - 1,
    character: (lines.length > 1 ? 0 : shown.character) + last.length,
    replaced: 0,
    selected: 0,
    texts: texts.map((t) => t.slice(edit.text.length)),
  };
  return { kind, text: edit.text, next };
}
