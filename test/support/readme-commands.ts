/**
 * The commands of a README section, read from its fenced `sh` blocks, so that a test can run
 * them as a reader would (test/readme-commands.e2e-spec.ts). A line ending in `\` goes on on the
 * next; a line starting with `#` is a comment, and `# → 201 …` right after a command says the
 * status it answers; a trailing `# 30` (a bare JSON value) is what it prints. `<name>` is a
 * placeholder the test fills from what the daemon answered before; a CLI line written as a
 * synopsis (`sinks list | replay <id> [--from a|b] | remove <id>`) stands for each command it shows.
 */

export type CommandKind = 'start' | 'suite' | 'curl' | 'cli';

export interface ReadmeCommand {
  /** Line of the README where the command starts (1-based). */
  line: number;
  /** The command as written, continuation lines joined, its trailing comment left out. */
  text: string;
  comment: string | null;
  kind: CommandKind;
  /** `start`: the variables set before `npm start` (`SINK_ALLOWED_NETWORKS=… npm start`). */
  env: Record<string, string>;
  /** From a `# → <status>` comment line right after it. */
  status: number | null;
  /** From a trailing comment that is a bare JSON value (`# 30`): what the command prints. */
  prints: string | null;
}

/** Tools a CLI line may pipe its output into; any other `|` in a CLI line separates a synopsis's alternatives. */
const PIPE_TOOLS = new Set(['jq', 'head', 'grep', 'wc', 'sort']);

/** The text of the `## title` section (up to the next `## `), and the line it starts at. */
export function readmeSection(markdown: string, title: string): { text: string; firstLine: number } {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line === `## ${title}`);
  if (start < 0) throw new Error(`the README has no section "## ${title}"`);
  const end = lines.findIndex((line, index) => index > start && line.startsWith('## '));
  return { text: lines.slice(start, end < 0 ? undefined : end).join('\n'), firstLine: start + 1 };
}

/** `command   # comment` → the command and the comment; a `#` inside quotes or a word is not one. */
export function splitComment(line: string): { command: string; comment: string | null } {
  let quote: string | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i];
    if (quote !== null) {
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '#' && (i === 0 || /\s/.test(line[i - 1]))) {
      return { command: line.slice(0, i).trimEnd(), comment: line.slice(i + 1).trim() };
    }
  }
  return { command: line.trimEnd(), comment: null };
}

function kindOf(text: string): { kind: CommandKind; env: Record<string, string> } {
  if (text === 'npm ci && npm start') return { kind: 'start', env: {} };
  if (text === 'npm ci && npm test') return { kind: 'suite', env: {} };
  const start = /^((?:[A-Z][A-Z0-9_]*=\S+\s+)+)npm start$/.exec(text);
  if (start) {
    const env = Object.fromEntries(
      start[1]
        .trim()
        .split(/\s+/)
        .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
    );
    return { kind: 'start', env };
  }
  if (/^curl\s/.test(text)) return { kind: 'curl', env: {} };
  if (/^(npx )?menu-sync\s/.test(text)) return { kind: 'cli', env: {} };
  throw new Error(`a command this test does not know how to run: ${text}`);
}

/** A trailing comment that is a bare JSON value (`30`, `"committed"`, `true`), as text; else null. */
function printed(comment: string | null): string | null {
  if (comment === null) return null;
  try {
    const value: unknown = JSON.parse(comment);
    return typeof value === 'object' && value !== null ? null : comment;
  } catch {
    return null;
  }
}

/** Every command of the fenced blocks of `## title`, in order. A block of another language than `sh` is an error. */
export function sectionCommands(markdown: string, title: string): ReadmeCommand[] {
  const { text, firstLine } = readmeSection(markdown, title);
  const lines = text.split('\n');
  const commands: ReadmeCommand[] = [];
  let fence: string | null = null;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const marker = /^```(\S*)\s*$/.exec(line);
    if (marker && fence === null) {
      if (marker[1] !== 'sh')
        throw new Error(`README line ${firstLine + i}: a \`\`\`${marker[1]} block; commands go in sh`);
      fence = marker[1];
      continue;
    }
    if (marker) {
      fence = null;
      continue;
    }
    if (fence === null || line.trim() === '') continue;
    const status = /^#\s*→\s*(\d{3})\b/.exec(line.trim());
    if (status && commands.length > 0) commands[commands.length - 1].status = Number(status[1]);
    if (line.trim().startsWith('#')) continue;
    const start = i;
    let joined = line;
    while (/\\\s*$/.test(joined) && i + 1 < lines.length)
      joined = `${joined.replace(/\\\s*$/, '')} ${lines[++i].trim()}`;
    const { command, comment } = splitComment(joined);
    const normalized = command.replace(/\s+/g, ' ').trim();
    commands.push({
      line: firstLine + start,
      text: normalized,
      comment,
      ...kindOf(normalized),
      status: null,
      prints: printed(comment),
    });
  }
  if (fence !== null) throw new Error(`the section "${title}" ends inside a fenced block`);
  return commands;
}

/** Splits at ` | ` outside brackets. */
function alternativesOf(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '[') depth++;
    if (c === ']') depth--;
    if (depth === 0 && text.startsWith(' | ', i)) {
      parts.push(current);
      current = '';
      i += 2;
      continue;
    }
    current += c;
  }
  return [...parts, current].map((part) => part.trim());
}

/** `replay <id> [--from a|b]` → `replay <id>`, `replay <id> --from a`, `replay <id> --from b`. */
function optionVariants(text: string): string[] {
  const match = /\s*\[([^\]]*)\]/.exec(text);
  if (!match) return [text.trim()];
  const before = text.slice(0, match.index);
  const after = text.slice(match.index + match[0].length);
  const [flag, ...rest] = match[1].trim().split(/\s+/);
  const values = rest.join(' ');
  const choices = values === '' ? [flag] : values.split('|').map((value) => `${flag} ${value}`);
  return [`${before}${after}`, ...choices.map((choice) => `${before} ${choice}${after}`)].flatMap(optionVariants);
}

/**
 * The CLI commands a CLI line stands for: itself, or each alternative and option of a synopsis
 * (`menu-sync sinks list | replay <id> [--from snapshot|now] | remove <id>`), in the order written.
 */
export function cliCommands(text: string): string[] {
  const match = /^((?:npx )?menu-sync) (.*)$/.exec(text);
  if (!match) throw new Error(`not a CLI line: ${text}`);
  const [, program, rest] = match;
  const alternatives = alternativesOf(rest);
  const piped = alternatives.length > 1 && PIPE_TOOLS.has(alternatives[1].split(' ')[0]);
  if (piped || (alternatives.length === 1 && !rest.includes('['))) return [text];
  const group = alternatives[0].split(' ')[0];
  return alternatives.flatMap((alternative, index) => {
    const full = index === 0 || alternative.startsWith(`${group} `) ? alternative : `${group} ${alternative}`;
    return optionVariants(full).map((variant) => `${program} ${variant}`);
  });
}

/** The placeholders (`<id>`, `<cursor>`) of a command, in order; `…` counts as one too. */
export function placeholdersOf(text: string): string[] {
  return [...text.matchAll(/<([a-z_]+)>|…/g)].map((match) => match[1] ?? '…');
}

/** Options of curl that take a value: the word after one is not a URL. */
const CURL_VALUE_OPTIONS = new Set([
  '-H',
  '-d',
  '-X',
  '-o',
  '-w',
  '-u',
  '-A',
  '-e',
  '-m',
  '-D',
  '--header',
  '--data',
  '--data-raw',
  '--data-binary',
  '--request',
  '--output',
  '--write-out',
  '--max-time',
  '--user',
]);

/** Shell words, quotes removed (no expansions): enough to find curl's URLs. */
function words(text: string): string[] {
  return [...text.matchAll(/'([^']*)'|"((?:[^"\\]|\\.)*)"|(\S+)/g)].map((match) => match[1] ?? match[2] ?? match[3]);
}

/** The URLs curl is given in a command (every curl of a pipeline), with or without a scheme. */
function curlUrls(text: string): string[] {
  const urls: string[] = [];
  let inCurl = false;
  let skip = false;
  for (const word of words(text)) {
    if (word === '|' || word === '&&' || word === ';') inCurl = false;
    else if (word === 'curl') inCurl = true;
    else if (!inCurl || skip) skip = false;
    else if (CURL_VALUE_OPTIONS.has(word)) skip = true;
    else if (!word.startsWith('-')) urls.push(word);
  }
  return urls;
}

/**
 * The hosts a command names: of every `scheme://[user@]host` in it (in a JSON body too) and of every
 * URL curl is given (`localhost:3000/x` has no scheme).
 */
export function hostsOf(text: string): string[] {
  const host = /^(?:[a-z][a-z0-9+.-]*:\/\/)?(?:[^@/\s]*@)?(\[[^\]]+\]|[^:/\s?#]+)/i;
  const inText = [...text.matchAll(/[a-z][a-z0-9+.-]*:\/\/(?:[^@/\s'"]*@)?(\[[^\]]+\]|[^:/\s'"?#]+)/gi)].map(
    (match) => match[1],
  );
  return [...inText, ...curlUrls(text).map((url) => host.exec(url)?.[1] ?? url)];
}
