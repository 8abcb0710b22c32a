import { AppError } from '../common/app-error.js';

export class ConnectionNotFoundError extends AppError {
  constructor(id: number) {
    super('connection_not_found', 404, 'Not Found', `There is no connection ${id}.`);
  }
}
