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
