import { Controller, Param, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { IngressService } from './ingress.service.js';

@ApiExcludeController()
@Controller('webhooks')
export class IngressController {
  constructor(private readonly ingress: IngressService) {}

  @Post(':key')
  async receive(@Param('key') key: string, @Req() request: FastifyRequest, @Res({ passthrough: true }) reply: FastifyReply) {
    const outcome = await this.ingress.receive({
      key,
      body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
      contentType: request.headers['content-type'],
      receivedAt: new Date(),
    });
    reply.status(outcome.status);
    return outcome.body;
  }
}
