import { Readable } from 'node:stream';
import { Controller, Get, Headers, Query, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiTags } from '@nestjs/swagger';
import type { FastifyReply } from 'fastify';
import { routedRead } from '../changes/min-cursor.js';
import { ApiTokenGuard } from '../common/api-token.guard.js';
import { ReadRouter } from '../database/read-router.service.js';
import { JSON_TYPE } from '../query/resource-answers.js';
import { MenuDocumentService } from './menu-document.service.js';
import { MenuQuery } from './menu-query.dto.js';

/**
 * `/menu`: 304 on a matching ETag, else the document streamed, with its X-Changes-Cursor when live;
 * read where `router` sends it.
 */
export async function sendMenu(
  reply: FastifyReply,
  menus: MenuDocumentService,
  router: ReadRouter,
  query: MenuQuery,
  ifNoneMatch: string | undefined,
): Promise<void> {
  const answer = await routedRead(router, reply, query.min_cursor, (side) =>
    menus.menu(query.owner_id, query.form, ifNoneMatch, query.as_of, side),
  );
  reply.header('ETag', answer.etag);
  if (answer.notModified) {
    await reply.status(304).send();
    return;
  }
  if (answer.changesCursor !== null) reply.header('X-Changes-Cursor', answer.changesCursor);
  const body = answer.chunks instanceof Readable ? answer.chunks : Readable.from(answer.chunks, { objectMode: false });
  // A client gone before the first chunk: the snapshot's connection is released all the same.
  body.once('close', () => void answer.close?.());
  await reply.status(200).type(JSON_TYPE).send(body);
}

/** The whole menu document of an owner (docs/reference.md §5). */
@ApiTags('menu')
@ApiBearerAuth()
@UseGuards(ApiTokenGuard)
@Controller('api/v1')
export class MenuController {
  constructor(
    private readonly menus: MenuDocumentService,
    private readonly router: ReadRouter,
  ) {}

  @Get('menu')
  async menu(
    @Query() query: MenuQuery,
    @Headers('if-none-match') ifNoneMatch: string | undefined,
    @Res() reply: FastifyReply,
  ): Promise<void> {
    await sendMenu(reply, this.menus, this.router, query, ifNoneMatch);
  }
}
