import { createParamDecorator, ExecutionContext } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { AppError, BadRequestError } from './app-error.js';
import { createValidationPipe } from './validation.pipe.js';

class UnsupportedMediaTypeError extends AppError {
  constructor() {
    super(
      'unsupported_media_type',
      415,
      'Unsupported Media Type',
      'The body must be JSON (Content-Type: application/json).',
    );
  }
}

/**
 * The request body parsed as JSON (the daemon reads every body as bytes, see app.factory.ts);
 * an empty body is `{}`. Not JSON → 400 (415 for another media type). Validate with `jsonBodyValidation`.
 */
export const JsonBody = createParamDecorator((_data: unknown, context: ExecutionContext): unknown => {
  const request = context.switchToHttp().getRequest<FastifyRequest>();
  const body = request.body;
  if (!Buffer.isBuffer(body) || body.length === 0) return {};
  if (!/^application\/([\w.+-]+\+)?json\s*(;|$)/i.test(request.headers['content-type'] ?? ''))
    throw new UnsupportedMediaTypeError();
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw new BadRequestError('The body is not valid JSON.', 'body');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new BadRequestError('The body must be a JSON object.', 'body');
  return parsed;
});

export const jsonBodyValidation = createValidationPipe({ validateCustomDecorators: true });
