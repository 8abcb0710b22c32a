import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Observable, tap } from 'rxjs';

/** Repeats a body's `changes_cursor` as the `X-Changes-Cursor` header (CONTRACT §11). */
@Injectable()
export class ChangesCursorHeader implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(tap((body) => repeatChangesCursor(context.switchToHttp().getResponse<FastifyReply>(), body)));
  }
}

/** Sets `X-Changes-Cursor` from the body's `changes_cursor`, when it has one. */
export function repeatChangesCursor(reply: FastifyReply, body: unknown): void {
  const cursor = (body as { changes_cursor?: unknown } | null)?.changes_cursor;
  if (typeof cursor === 'string') reply.header('X-Changes-Cursor', cursor);
}
