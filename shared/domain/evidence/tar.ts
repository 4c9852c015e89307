/**
 * The ustar archive format (POSIX.1-1988), written and read here rather than through a library:
 * a bundle needs regular files only, the writer must be deterministic (fixed mode, owner and
 * mtime, so the same files give the same bytes), and the offline verifier must read a bundle with
 * nothing but this module. Both directions together are smaller than a dependency's adapter code.
 */

const BLOCK = 512;
const MAX_NAME = 100;
const MAX_PREFIX = 155;

/** One regular file of an archive. */
export interface TarEntry {
  readonly path: string;
  readonly body: Uint8Array;
}

export class TarFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TarFormatError';
  }
}

function writeString(header: Uint8Array, offset: number, length: number, text: string): void {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length > length) throw new TarFormatError(`'${text}' does not fit a ${length}-byte tar field`);
  header.set(bytes, offset);
}

function writeOctal(header: Uint8Array, offset: number, length: number, value: number): void {
  writeString(header, offset, length, `${value.toString(8).padStart(length - 1, '0')}\0`);
}

/** Splits a path into ustar's name and prefix fields, or throws when it cannot fit. */
function splitPath(path: string): { name: string; prefix: string } {
  if (Buffer.byteLength(path) <= MAX_NAME) return { name: path, prefix: '' };
  for (let cut = path.indexOf('/'); cut > 0; cut = path.indexOf('/', cut + 1)) {
    const prefix = path.slice(0, cut);
    const name = path.slice(cut + 1);
    if (Buffer.byteLength(prefix) <= MAX_PREFIX && Buffer.byteLength(name) <= MAX_NAME) return { name, prefix };
  }
  throw new TarFormatError(`the path '${path}' is too long for a ustar archive`);
}

/** The 512-byte header of a regular file. */
export function tarHeader(path: string, size: number): Uint8Array {
  if (path === '' || path.startsWith('/') || path.split('/').includes('..'))
    throw new TarFormatError(`'${path}' is not a relative path inside the archive`);
  const header = new Uint8Array(BLOCK);
  const { name, prefix } = splitPath(path);
  writeString(header, 0, 100, name);
  writeOctal(header, 100, 8, 0o644);
  writeOctal(header, 108, 8, 0);
  writeOctal(header, 116, 8, 0);
  writeOctal(header, 124, 12, size);
  writeOctal(header, 136, 12, 0);
  header.fill(0x20, 148, 156); // the checksum counts its own field as spaces
  header[156] = 0x30; // '0': a regular file
  writeString(header, 257, 6, 'ustar\0');
  writeString(header, 263, 2, '00');
  writeString(header, 345, 155, prefix);
  const sum = header.reduce((total, byte) => total + byte, 0);
  writeString(header, 148, 8, `${sum.toString(8).padStart(6, '0')}\0 `);
  return header;
}

/** The zero bytes that pad a body of `size` bytes to a whole block. */
export function tarPadding(size: number): Uint8Array {
  return new Uint8Array((BLOCK - (size % BLOCK)) % BLOCK);
}

/** The two zero blocks that end an archive. */
export const TAR_END: Uint8Array = new Uint8Array(BLOCK * 2);

/** One entry as the blocks it takes: header, body, padding. */
export function tarEntry(entry: TarEntry): Uint8Array[] {
  return [tarHeader(entry.path, entry.body.length), entry.body, tarPadding(entry.body.length)];
}

/** A whole archive in memory (for a single run's bundle; exports stream the same blocks). */
export function writeTar(entries: readonly TarEntry[]): Buffer {
  return Buffer.concat([...entries.flatMap(tarEntry), TAR_END]);
}

function readString(block: Uint8Array, offset: number, length: number): string {
  const field = block.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return Buffer.from(end === -1 ? field : field.subarray(0, end)).toString('utf8');
}

function readOctal(block: Uint8Array, offset: number, length: number, what: string): number {
  const text = readString(block, offset, length).trim();
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError(`the ${what} field of a tar header is not octal`);
  return Number.parseInt(text, 8);
}

/**
 * Reads the regular files of an archive, in order, checking every header's checksum. Anything but
 * a regular file (a link, a device, a directory) is refused: a bundle never holds one.
 */
export function readTar(archive: Uint8Array): TarEntry[] {
  const entries: TarEntry[] = [];
  let offset = 0;
  while (offset + BLOCK <= archive.length) {
    const header = archive.subarray(offset, offset + BLOCK);
    if (header.every((byte) => byte === 0)) return entries;
    const stored = readOctal(header, 148, 8, 'checksum');
    const sum = header.reduce((total, byte, i) => total + (i >= 148 && i < 156 ? 0x20 : byte), 0);
    if (sum !== stored) throw new TarFormatError(`the tar header at byte ${offset} has a bad checksum`);
    const type = header[156];
    if (type !== 0x30 && type !== 0) throw new TarFormatError(`the tar entry at byte ${offset} is not a regular file`);
    const name = readString(header, 0, 100);
    const prefix = readString(header, 345, 155);
    const size = readOctal(header, 124, 12, 'size');
    const start = offset + BLOCK;
    if (start + size > archive.length) throw new TarFormatError(`the tar entry '${name}' is cut short`);
    entries.push({ path: prefix ? `${prefix}/${name}` : name, body: archive.subarray(start, start + size) });
    offset = start + size + ((BLOCK - (size % BLOCK)) % BLOCK);
  }
  throw new TarFormatError('the archive ends without its end-of-archive blocks');
}
