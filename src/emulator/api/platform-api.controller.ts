import { Controller, Get, Header, Headers, Param, Req } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { PlatformApiService } from './platform-api.service.js';
import type { ApiDocument, PageRequest } from './platform-api.service.js';

const JSON_API = 'application/vnd.api+json';

/** Spec endpoint 3 and the menu snapshot paths of docs/reference.md §7. */
@Controller('stores')
export class PlatformApiController {
  constructor(private readonly api: PlatformApiService) {}

  @Get(':storeId/orders')
  @Header('Content-Type', JSON_API)
  orders(
    @Param('storeId') storeId: string,
    @Req() request: FastifyRequest,
    @Headers('authorization') authorization?: string,
  ): ApiDocument {
    return this.api.orders(storeId, pageRequest(request, authorization));
  }

  @Get(':storeId/:resources')
  @Header('Content-Type', JSON_API)
  snapshot(
    @Param('storeId') storeId: string,
    @Param('resources') resources: string,
    @Req() request: FastifyRequest,
    @Headers('authorization') authorization?: string,
  ): ApiDocument {
    return this.api.menuSnapshot(storeId, resources, pageRequest(request, authorization));
  }
}

function pageRequest(request: FastifyRequest, authorization: string | undefined): PageRequest {
  const path = request.url.split('?')[0];
  return {
    authorization,
    baseUrl: `${request.protocol}://${request.headers.host ?? request.hostname}`,
    path,
    query: request.query as Record<string, unknown>,
  };
}
