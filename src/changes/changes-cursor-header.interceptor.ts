import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { Observable, tap } from 'rxjs';

/** Repeats a body's `changes_cursor` as the `X-Changes-Cursor` header (CONTRACT §11). */
@Injectable()
export class ChangesCursorHeader implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    return next.handle().pipe(tap((body) => {
      const cursor = (body as { changes_cursor?: unknown } | null)?.changes_cursor;
      if (typeof cursor === 'string') context.switchToHttp().getResponse<FastifyReply>().header('X-Changes-Cursor', cursor);
    }));
  }
}
