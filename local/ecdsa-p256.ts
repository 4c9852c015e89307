import { type KeyObject, randomBytes } from 'node:crypto';

/**
 * ECDSA P-256 over a digest that is already computed, which KMS `Sign` with `MessageType: DIGEST`
 * does and Node's crypto cannot (it always hashes the message it is given). Local glue only: the
 * signatures it makes are checked with Node's own `verify` in the tests.
 */
const P = 0xffffffff00000001000000000000000000000000ffffffffffffffffffffffffn;
const N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n;
const A = P - 3n;
const G = {
  x: 0x6b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c296n,
  y: 0x4fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5n,
};
type Point = { x: bigint; y: bigint } | null;

const mod = (a: bigint, m: bigint) => ((a % m) + m) % m;
function power(base: bigint, exponent: bigint, m: bigint): bigint {
  let result = 1n;
  let b = mod(base, m);
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % m;
    b = (b * b) % m;
  }
  return result;
}
const inverse = (a: bigint, m: bigint) => power(a, m - 2n, m);

function add(p: Point, q: Point): Point {
  if (!p) return q;
  if (!q) return p;
  if (p.x === q.x && mod(p.y + q.y, P) === 0n) return null;
  const slope =
    p.x === q.x && p.y === q.y
      ? mod((3n * p.x * p.x + A) * inverse(2n * p.y, P), P)
      : mod((q.y - p.y) * inverse(q.x - p.x, P), P);
  const x = mod(slope * slope - p.x - q.x, P);
  return { x, y: mod(slope * (p.x - x) - p.y, P) };
}

function multiply(k: bigint, point: Point): Point {
  let result: Point = null;
  let addend = point;
  for (let e = k; e > 0n; e >>= 1n) {
    if (e & 1n) result = add(result, addend);
    addend = add(addend, addend);
  }
  return result;
}

const toBigInt = (bytes: Uint8Array) => BigInt(`0x${Buffer.from(bytes).toString('hex') || '0'}`);

function derInteger(value: bigint): Buffer {
  let hex = value.toString(16);
  if (hex.length % 2) hex = `0${hex}`;
  let bytes = Buffer.from(hex, 'hex');
  if ((bytes[0] ?? 0) & 0x80) bytes = Buffer.concat([Buffer.from([0]), bytes]);
  return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes]);
}

/** A DER-encoded ECDSA signature of a 32-byte digest with a P-256 private key. */
export function signDigestP256(privateKey: KeyObject, digest: Uint8Array): Buffer {
  const jwk = privateKey.export({ format: 'jwk' });
  if (jwk.crv !== 'P-256' || jwk.d === undefined) throw new Error('the key is not a P-256 private key');
  const d = toBigInt(Buffer.from(jwk.d, 'base64url'));
  const z = toBigInt(digest);
  for (;;) {
    const k = mod(toBigInt(randomBytes(32)), N);
    if (k === 0n) continue;
    const point = multiply(k, G);
    if (!point) continue;
    const r = mod(point.x, N);
    if (r === 0n) continue;
    let s = mod(inverse(k, N) * (z + r * d), N);
    if (s === 0n) continue;
    if (s > N / 2n) s = N - s; // low-s, as most verifiers prefer
    const body = Buffer.concat([derInteger(r), derInteger(s)]);
    return Buffer.concat([Buffer.from([0x30, body.length]), body]);
  }
}
