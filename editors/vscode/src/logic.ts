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

/** A markdown page for an explanation that is still streaming in. */
export function explanationPage(code: string, language: string, text: string, done: boolean): string {
  const fence = "```";
  const status = done ? "" : "\n\n*…generating*";
  return `## Explanation\n\n${fence}${language}\n${code}\n${fence}\n\n${text}${status}\n`;
}
