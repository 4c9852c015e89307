import { GetPublicKeyCommand, type KMSClient, SignCommand } from '@aws-sdk/client-kms';
import type { ManifestSigner } from '../app/evidence-ports.js';

/** DER (SPKI) bytes as a PEM public key. */
function pemOf(der: Uint8Array): string {
  const lines =
    Buffer.from(der)
      .toString('base64')
      .match(/.{1,64}/g) ?? [];
  return `-----BEGIN PUBLIC KEY-----\n${lines.join('\n')}\n-----END PUBLIC KEY-----\n`;
}

/**
 * Signs with an asymmetric KMS key (ECC_NIST_P256, SIGN_VERIFY): the private key never leaves
 * KMS. Digests are signed (`MessageType: DIGEST`), so a manifest of any size takes one call. The
 * public key is fetched once per process.
 */
export function makeKmsSigner(client: KMSClient, keyId: string): ManifestSigner {
  let publicKey: Promise<{ keyId: string; pem: string }> | undefined;
  return {
    publicKey() {
      publicKey ??= client.send(new GetPublicKeyCommand({ KeyId: keyId })).then((out) => {
        if (!out.PublicKey || !out.KeyId) throw new Error(`KMS gave no public key for ${keyId}`);
        if (out.KeySpec !== undefined && out.KeySpec !== 'ECC_NIST_P256')
          throw new Error(`the evidence key ${keyId} is ${out.KeySpec}, not ECC_NIST_P256`);
        return { keyId: out.KeyId, pem: pemOf(out.PublicKey) };
      });
      publicKey.catch(() => (publicKey = undefined));
      return publicKey;
    },
    async signDigest(digest) {
      const out = await client.send(
        new SignCommand({ KeyId: keyId, Message: digest, MessageType: 'DIGEST', SigningAlgorithm: 'ECDSA_SHA_256' }),
      );
      if (!out.Signature) throw new Error(`KMS gave no signature with ${keyId}`);
      return out.Signature;
    },
  };
}
