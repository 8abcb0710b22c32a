/** A resource as docs/reference.md §5 shapes it, built as JSON by PostgreSQL (keys in the API's order). */
export const resourceJson = (alias: string, type: string, extra = '') => `json_build_object(
  'type', '${type}', 'id', ${alias}.id, 'owner_id', ${alias}.owner_id, 'attributes', ${alias}.attributes,
  'relationships', ${alias}.relationships,
  'version', json_build_object('event_id', ${alias}.event_id,
    'occurred_at', to_char(${alias}.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), 'position', ${alias}.position),
  'deleted', ${alias}.deleted${extra})`;

/** The ids of a to-many relationship in order (string or number ids, as the API's expansion reads them): rows (id, ord). */
export const linkedIds = (relationships: string, name: string) => `(
  SELECT link ->> 'id' AS id, ord FROM jsonb_array_elements(
    CASE WHEN jsonb_typeof(${relationships} -> '${name}' -> 'data') = 'array' THEN ${relationships} -> '${name}' -> 'data' ELSE '[]' END)
    WITH ORDINALITY AS l(link, ord)
   WHERE jsonb_typeof(link -> 'id') IN ('string', 'number'))`;
