/** How the CLI prints: colour and tables on a terminal, plain text when piped, JSON for scripts. */
export interface Output {
  readonly json: boolean;
  readonly color: boolean;
  /** A line on stdout. */
  line(text?: string): void;
  /** A value as one JSON line on stdout. */
  data(value: unknown): void;
  /** A line on stderr. */
  error(text: string): void;
}

export interface OutputOptions {
  readonly json: boolean;
  /** False for `--no-color`. */
  readonly colorFlag: boolean;
  readonly isTTY: boolean;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly write?: (text: string) => void;
  readonly writeError?: (text: string) => void;
}

/** Colour only on a terminal, never with `NO_COLOR` (any non-empty value), `TERM=dumb` or `--no-color`. */
export function useColor(options: Pick<OutputOptions, 'colorFlag' | 'isTTY' | 'env' | 'json'>): boolean {
  const noColor = options.env.NO_COLOR !== undefined && options.env.NO_COLOR !== '';
  return options.isTTY && options.colorFlag && !options.json && !noColor && options.env.TERM !== 'dumb';
}

export function makeOutput(options: OutputOptions): Output {
  const write = options.write ?? ((text: string) => process.stdout.write(text));
  const writeError = options.writeError ?? ((text: string) => process.stderr.write(text));
  return {
    json: options.json,
    color: useColor(options),
    line: (text = '') => write(`${text}\n`),
    data: (value) => write(`${JSON.stringify(value)}\n`),
    error: (text) => writeError(`${text}\n`),
  };
}

const CODES = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  cyan: [36, 39],
} as const;
export type Style = keyof typeof CODES;

/** `text` in `style` when colour is on, else as it is. */
export function paint(output: Pick<Output, 'color'>, style: Style | undefined, text: string): string {
  if (!output.color || style === undefined) return text;
  const [open, close] = CODES[style];
  return `\u001b[${open}m${text}\u001b[${close}m`;
}

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;]*m/g;
const width = (text: string) => [...text.replace(ANSI, '')].length;

/** The colour of a status word, whatever it belongs to (run, step, worker, gate). */
export function statusStyle(status: string): Style | undefined {
  if (['succeeded', 'approved', 'idle', 'ok', 'online'].includes(status)) return 'green';
  if (['failed', 'cancelled', 'rejected', 'dead', 'expired', 'timed_out', 'unavailable'].includes(status)) return 'red';
  if (
    [
      'waiting_for_approval',
      'paused',
      'requested',
      'escalated',
      'draining',
      'throttled',
      'offline',
      'degraded',
    ].includes(status)
  )
    return 'yellow';
  if (['running', 'busy', 'leased', 'rolling_back'].includes(status)) return 'cyan';
  return undefined;
}

/**
 * An aligned table like `kubectl get`: upper-case headers, columns padded to their widest
 * cell, two spaces apart, no trailing spaces. Cells may carry colour; widths ignore it.
 */
export function table(output: Pick<Output, 'color'>, headers: readonly string[], rows: readonly string[][]): string {
  const widths = headers.map((header, i) => Math.max(width(header), ...rows.map((row) => width(row[i] ?? ''))));
  const format = (cells: readonly string[]) =>
    cells
      .map((cell, i) => (i === cells.length - 1 ? cell : cell + ' '.repeat((widths[i] ?? 0) - width(cell))))
      .join('  ')
      .trimEnd();
  return [paint(output, 'bold', format(headers.map((h) => h.toUpperCase()))), ...rows.map(format)].join('\n');
}

/** `90` seconds as `1m30s`, the way `kubectl` shows ages. */
export function age(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 === 0 ? '' : `${s % 60}s`}`;
  if (s < 86_400)
    return `${Math.floor(s / 3600)}h${Math.floor((s % 3600) / 60) === 0 ? '' : `${Math.floor((s % 3600) / 60)}m`}`;
  return `${Math.floor(s / 86_400)}d`;
}
