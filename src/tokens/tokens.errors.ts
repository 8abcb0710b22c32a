import { AppError } from '../common/app-error.js';

export class TokenNotFoundError extends AppError {
  constructor(id: string) {
    super('token_not_found', 404, 'Not Found', `No stored token ${id}.`);
  }
}

/** A token id prefix (the CLI's `tokens revoke`) that names more than one token. */
export class AmbiguousTokenIdError extends AppError {
  constructor(prefix: string) {
    super('token_id_ambiguous', 400, 'Bad Request', `More than one stored token's id starts with ${prefix}.`, {
      field: 'id',
    });
  }
}
