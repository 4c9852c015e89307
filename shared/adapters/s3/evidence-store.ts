import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  NoSuchKey,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import type { EvidenceObjects } from '../../app/evidence-ports.js';

/** S3's smallest part but the last. */
const PART_BYTES = 5 * 1024 * 1024;

/**
 * The evidence bucket. Objects are encrypted with the bucket's KMS key by the bucket's default;
 * versioning keeps every write, so a replaced object is never silently lost.
 */
export function makeS3EvidenceObjects(client: S3Client, bucket: string): EvidenceObjects {
  return {
    async get(key) {
      try {
        const { Body } = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        return Body ? await Body.transformToByteArray() : undefined;
      } catch (error) {
        if (error instanceof NoSuchKey) return undefined;
        throw error;
      }
    },

    async put(key, body, contentType) {
      await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: contentType }));
    },

    async putStream(key, chunks, contentType) {
      const { UploadId } = await client.send(
        new CreateMultipartUploadCommand({ Bucket: bucket, Key: key, ContentType: contentType }),
      );
      if (!UploadId) throw new Error(`S3 gave no upload id for ${key}`);
      const parts: Array<{ ETag: string; PartNumber: number }> = [];
      let pending: Uint8Array[] = [];
      let pendingBytes = 0;
      let size = 0;
      const flush = async () => {
        const PartNumber = parts.length + 1;
        const { ETag } = await client.send(
          new UploadPartCommand({ Bucket: bucket, Key: key, UploadId, PartNumber, Body: Buffer.concat(pending) }),
        );
        parts.push({ ETag: ETag ?? '', PartNumber });
        pending = [];
        pendingBytes = 0;
      };
      try {
        for await (const chunk of chunks) {
          pending.push(chunk);
          pendingBytes += chunk.length;
          size += chunk.length;
          if (pendingBytes >= PART_BYTES) await flush();
        }
        if (pendingBytes > 0 || parts.length === 0) await flush();
        await client.send(
          new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId, MultipartUpload: { Parts: parts } }),
        );
        return size;
      } catch (error) {
        await client
          .send(new AbortMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId }))
          .catch(() => undefined);
        throw error;
      }
    },
  };
}
