import { describe, expect, it } from 'vitest';
import { age, makeOutput, paint, table, useColor } from '../../../cli/output.js';

const tty = { isTTY: true, colorFlag: true, json: false };

describe('output', () => {
  it('colours only on a terminal without NO_COLOR, --no-color or --json', () => {
    expect(useColor({ ...tty, env: {} })).toBe(true);
    expect(useColor({ ...tty, isTTY: false, env: {} })).toBe(false);
    expect(useColor({ ...tty, env: { NO_COLOR: '1' } })).toBe(false);
    expect(useColor({ ...tty, env: { NO_COLOR: '' } })).toBe(true);
    expect(useColor({ ...tty, colorFlag: false, env: {} })).toBe(false);
    expect(useColor({ ...tty, json: true, env: {} })).toBe(false);
    expect(useColor({ ...tty, env: { TERM: 'dumb' } })).toBe(false);
  });

  it('aligns table columns two spaces apart with upper-case headers and no trailing space', () => {
    const text = table(
      { color: false },
      ['name', 'status', 'tasks'],
      [
        ['dev-flex-1', 'idle', '3'],
        ['w2', 'busy', '12'],
      ],
    );
    expect(text.split('\n')).toEqual(['NAME        STATUS  TASKS', 'dev-flex-1  idle    3', 'w2          busy    12']);
  });

  it('measures coloured cells by what shows, not by their escape codes', () => {
    const green = paint({ color: true }, 'green', 'ok');
    expect(green).not.toBe('ok');
    // eslint-disable-next-line no-control-regex
    const shown = (line: string) => line.replace(/\u001b\[[0-9;]*m/g, '');
    const lines = table(
      { color: true },
      ['a', 'b'],
      [
        [green, 'x'],
        ['long', 'y'],
      ],
    )
      .split('\n')
      .map(shown);
    expect(lines[1]?.indexOf('x')).toBe(lines[2]?.indexOf('y'));
  });

  it('writes plain text when colour is off and one JSON value per line for scripts', () => {
    const written: string[] = [];
    const output = makeOutput({ json: true, colorFlag: true, isTTY: true, env: {}, write: (t) => written.push(t) });
    expect(paint(output, 'red', 'failed')).toBe('failed');
    output.data({ a: 1 });
    expect(written).toEqual(['{"a":1}\n']);
  });

  it('shows ages the way kubectl does', () => {
    expect([age(5), age(90), age(3600), age(3 * 86_400)]).toEqual(['5s', '1m30s', '1h', '3d']);
  });
});
