import { createHash, createPublicKey, verify as verifySignature } from 'node:crypto';
import { z } from 'zod';

/** The DSSE payload type of a Capstan manifest (brief: "Evidence"). */
export const MANIFEST_PAYLOAD_TYPE = 'application/vnd.capstan.manifest+json';

/** A DSSE envelope (https://github.com/secure-systems-lab/dsse, protocol v1). */
export const dsseEnvelopeSchema = z.strictObject({
  payloadType: z.string().min(1),
  payload: z.base64(),
  signatures: z.array(z.strictObject({ keyid: z.string(), sig: z.base64() })).min(1),
});
export type DsseEnvelope = z.infer<typeof dsseEnvelopeSchema>;

/**
 * The pre-authentication encoding that DSSE signs instead of the bare payload:
 * `"DSSEv1" SP len(type) SP type SP len(body) SP body`, lengths in ASCII decimal bytes. Binding the
 * type into the signed bytes keeps a signature over one kind of document from verifying another.
 */
export function preAuthEncoding(payloadType: string, payload: Uint8Array): Buffer {
  const type = Buffer.from(payloadType, 'utf8');
  return Buffer.concat([
    Buffer.from(`DSSEv1 ${type.length} `, 'utf8'),
    type,
    Buffer.from(` ${payload.length} `, 'utf8'),
    payload,
  ]);
}

/** The SHA-256 digest of the PAE: what a KMS key signs with `MessageType: DIGEST`. */
export function paeDigest(payloadType: string, payload: Uint8Array): Buffer {
  return createHash('sha256').update(preAuthEncoding(payloadType, payload)).digest();
}

/** Wraps a payload and its DER-encoded ECDSA signature into an envelope. */
export function envelopeOf(
  payloadType: string,
  payload: Uint8Array,
  keyId: string,
  signature: Uint8Array,
): DsseEnvelope {
  return {
    payloadType,
    payload: Buffer.from(payload).toString('base64'),
    signatures: [{ keyid: keyId, sig: Buffer.from(signature).toString('base64') }],
  };
}

/**
 * Whether one of the envelope's signatures verifies over the PAE with `publicKeyPem` (ECDSA P-256,
 * SHA-256, DER signatures as KMS and openssl produce them). A malformed key verifies nothing.
 */
export function verifyEnvelope(envelope: DsseEnvelope, publicKeyPem: string): boolean {
  let key: ReturnType<typeof createPublicKey>;
  try {
    key = createPublicKey(publicKeyPem);
  } catch {
    return false;
  }
  const pae = preAuthEncoding(envelope.payloadType, Buffer.from(envelope.payload, 'base64'));
  return envelope.signatures.some((s) => {
    try {
      return verifySignature('sha256', pae, key, Buffer.from(s.sig, 'base64'));
    } catch {
      return false;
    }
  });
}
