import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { EmulatorHttpError } from './emulator-http.error.js';

/** Writes the emulator's deliberate answers as they are; anything else is a bare 500 (or Nest's own 4XX). */
@Catch()
export class EmulatorErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('Emulator');

  catch(error: unknown, host: ArgumentsHost): void {
    const reply = host.switchToHttp().getResponse<FastifyReply>();
    if (error instanceof EmulatorHttpError) {
      const body = typeof error.body === 'string' ? error.body : JSON.stringify(error.body);
      void reply
        .status(error.status)
        .headers({ ...error.headers, 'Content-Type': error.contentType })
        .send(body);
      return;
    }
    if (error instanceof HttpException) {
      const status = error.getStatus();
      void reply
        .status(status)
        .header('Content-Type', 'application/problem+json')
        .send(JSON.stringify({ type: 'about:blank', title: error.message, status, detail: error.message }));
      return;
    }
    this.logger.error({ msg: 'emulator handler failed', err: error });
    void reply
      .status(500)
      .header('Content-Type', 'application/problem+json')
      .send(
        JSON.stringify({
          type: 'about:blank',
          title: 'Internal Server Error',
          status: 500,
          detail: 'the emulator failed',
        }),
      );
  }
}
