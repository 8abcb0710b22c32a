import { applyDecorators } from '@nestjs/common';
import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, Matches } from 'class-validator';
import type { FastifyReply } from 'fastify';
import type { ReadRouter, ReadSide } from '../database/read-router.service.js';
import { decodeChangeCursor } from './change-cursor.js';

/** What a change cursor looks like (its meaning is checked by decodeChangeCursor). */
export const CHANGE_CURSOR = /^[A-Za-z0-9_-]{1,64}$/;

/** The `min_cursor` parameter of a read the replica may serve (docs/reference.md §5). */
export const MinCursor = () =>
  applyDecorators(
    ApiPropertyOptional({
      description:
        'a changes cursor this read must reflect: with a read replica, the read waits up to 5 s for the replica to hold that change, else the primary answers (the X-Min-Changes-Cursor header says the same)',
    }),
    IsOptional(),
    Matches(CHANGE_CURSOR, { message: 'min_cursor must be a cursor given out by this daemon' }),
  );

/**
 * The transaction a read must see: that of its `min_cursor` (the query parameter, else the
 * X-Min-Changes-Cursor header); 400 naming the one given when it is no cursor of this daemon.
 */
export function minTransactionId(
  parameter: string | undefined,
  header: string | string[] | undefined,
): string | undefined {
  if (parameter !== undefined) return decodeChangeCursor(parameter, 'min_cursor').transactionId;
  if (header === undefined) return undefined;
  return decodeChangeCursor(String(header), 'X-Min-Changes-Cursor').transactionId;
}

/**
 * Runs `read` on the side ReadRouter picks for the request's min_cursor, and, with a replica
 * configured, says in X-Served-By which side served it.
 */
export async function routedRead<T>(
  router: ReadRouter,
  reply: FastifyReply,
  minCursor: string | undefined,
  read: (side: ReadSide) => Promise<T>,
): Promise<T> {
  const transactionId = minTransactionId(minCursor, reply.request.headers['x-min-changes-cursor']);
  const [result] = await router.read(transactionId, (side) => {
    if (router.configured) reply.header('X-Served-By', side);
    return read(side);
  });
  return result;
}
