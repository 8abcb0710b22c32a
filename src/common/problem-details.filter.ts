import { ArgumentsHost, Catch, ExceptionFilter, HttpException, Logger } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isTransientDatabaseError } from '../database/database-errors.js';
import { AppError, ServiceUnavailableError } from './app-error.js';
import { problem, PROBLEM_CONTENT_TYPE, ProblemDetails } from './problem-details.js';

/** Turns every error into RFC 9457 problem+json; a 500 reveals nothing about the cause. */
@Catch()
export class ProblemDetailsFilter implements ExceptionFilter {
  private readonly logger = new Logger(ProblemDetailsFilter.name);

  catch(error: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const reply = http.getResponse<FastifyReply>();
    const request = http.getRequest<FastifyRequest>();
    sendProblem(reply, request, error, this.logger);
  }
}

/** What a client is told to wait after a transient database fault. */
const TRANSIENT_RETRY_AFTER_SECONDS = 1;

/** Answers an error as problem+json (with Retry-After for a transient fault). */
export function sendProblem(
  reply: FastifyReply,
  request: FastifyRequest,
  error: unknown,
  logger: Logger,
): FastifyReply {
  const { body, retryAfterSeconds } = problemAnswer(
    error,
    { reqId: request.id, route: request.routeOptions?.url },
    logger,
  );
  if (retryAfterSeconds !== undefined) reply.header('Retry-After', String(retryAfterSeconds));
  return reply.status(body.status).header('Content-Type', PROBLEM_CONTENT_TYPE).send(body);
}

/**
 * The problem answering an error, and the Retry-After to send with it (a transient fault); a
 * transient database fault and a server error are logged, under the request's id and route.
 */
export function problemAnswer(
  error: unknown,
  request: { reqId: string; route: string | undefined },
  logger: Logger,
): { body: ProblemDetails; retryAfterSeconds?: number } {
  if (!(error instanceof AppError) && isTransientDatabaseError(error)) {
    logger.warn({ ...request, reason: (error as Error)?.message }, 'database unavailable');
    return problemAnswer(
      new ServiceUnavailableError('The database is unavailable; retry later.', TRANSIENT_RETRY_AFTER_SECONDS),
      request,
      logger,
    );
  }
  const body = toProblem(error);
  if (body.status >= 500) logger.error({ err: error, ...request }, 'request failed');
  return error instanceof ServiceUnavailableError ? { body, retryAfterSeconds: error.retryAfterSeconds } : { body };
}

export function toProblem(error: unknown): ProblemDetails {
  if (error instanceof AppError) return problem(error.status, error.detail, error.code, error.extra);
  if (error instanceof HttpException) {
    const status = error.getStatus();
    const response = error.getResponse();
    const detail =
      typeof response === 'object' && response !== null && 'message' in response
        ? [response.message].flat().join('; ')
        : error.message;
    return problem(status, status >= 500 ? 'The server could not handle the request.' : String(detail));
  }
  const fastifyStatus = (error as { statusCode?: unknown })?.statusCode;
  if (typeof fastifyStatus === 'number' && fastifyStatus >= 400 && fastifyStatus < 500) {
    return problem(fastifyStatus, (error as Error).message);
  }
  return problem(500, 'The server could not handle the request.');
}
