// The VS Code client: starts `fastcomplete serve`, lets VS Code's LSP 3.18 support drive inline
// completions, and adds a status bar item, Explain Selection, Toggle Fast Mode and Show Stats.
// Tells the server where the cursor rests (fastcomplete/didFocus) so it can warm the prompt
// before the next keystroke, and shows its state (fastcomplete/status) in the status bar.
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
  isSynced,
  partialAcceptance,
  Shown,
  SYNCED_SCHEMES,
  serverCommand,
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
  const { command, args } = serverCommand(config().get<string>("serverPath"));
  const serverOptions: ServerOptions = { command, args };
  const clientOptions: LanguageClientOptions = {
    documentSelector: SYNCED_SCHEMES.map((scheme) => ({ scheme })),
    initializationOptions: settings,
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

  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Right, 100);
  status.command = "fastcomplete.toggleFastModeClient";
  refreshStatus();
  status.show();

  context.subscriptions.push(
    status,
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
