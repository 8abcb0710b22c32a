import { Controller, Get, Headers, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiTags } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ownerScopeOf } from '../common/owner-scope.js';
import { ReadRouter } from '../database/read-router.service.js';
import { ChangeFeedService } from './change-feed.service.js';
import { ChangesQuery } from './changes.dto.js';
import { openEventStream, writeEvent } from './sse-frames.js';
import { SseHeartbeat } from './sse-heartbeat.js';
import { minTransactionId, routedRead } from './min-cursor.js';

const HEARTBEAT_MS = 15_000;
/** One timer for every stream's keep-alive comments. */
const heartbeat = new SseHeartbeat(HEARTBEAT_MS);

/** An aborted signal once the client has gone (or the response has ended). */
function closedSignal(reply: FastifyReply): AbortSignal {
  const closed = new AbortController();
  reply.raw.once('close', () => closed.abort());
  return closed.signal;
}

@ApiTags('changes')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class ChangesController {
  constructor(
    private readonly feed: ChangeFeedService,
    private readonly router: ReadRouter,
  ) {}

  /** JSON pages (long-poll with `wait`), or Server-Sent Events with `Accept: text/event-stream`. */
  @Get('changes')
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    description: 'SSE: resume after this change (takes precedence over after)',
  })
  async changes(
    @Query() query: ChangesQuery,
    @Headers('accept') accept: string | undefined,
    @Headers('last-event-id') lastEventId: string | undefined,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    const scope = ownerScopeOf(request);
    if (!/(^|,)\s*text\/event-stream\s*(;|,|$)/i.test(accept ?? '')) {
      const gone = closedSignal(reply);
      return reply.send(
        await routedRead(this.router, reply, query.min_cursor, (side) => this.feed.page(query, gone, side, scope)),
      );
    }
    // Checked before the stream opens, so a bad or expired cursor is still a problem+json answer.
    const from = await this.feed.start(query.after, lastEventId);
    const side = await this.router.side(minTransactionId(query.min_cursor, request.headers['x-min-changes-cursor']));
    if (this.router.configured) reply.raw.setHeader('X-Served-By', side);
    reply.hijack();
    const closed = closedSignal(reply);
    openEventStream(reply.raw);
    const beating = heartbeat.follow(reply.raw);
    try {
      await this.feed.stream(
        {
          // The changes come as JSON text already (the shared read's, or stringified once).
          push: (json, cursor) => {
            writeEvent(reply.raw, 'change', json, cursor);
            beating.wrote();
          },
          stream: reply.raw,
        },
        from,
        query,
        closed,
        side,
        scope,
      );
    } finally {
      beating.end();
    }
    // The stream ended here (the daemon stopping, compaction passing it), or its client went: its
    // connection ends with it. Kept alive, 10,000 sockets outlived a shutdown's budget (the
    // clients come back on connections of their own).
    reply.raw.end(() => reply.raw.destroy());
  }
}
