type Schema = Record<string, unknown>;

/** Keywords whose values are data, not schemas: never walked. */
const DATA = new Set(['enum', 'const', 'default', 'examples', 'required']);

/** `json` with `f` applied to every subschema, innermost first (`root` says which is the top). */
export function mapSchemas(json: unknown, f: (node: Schema, root: boolean) => Schema): unknown {
  const walk = (node: unknown, root: boolean): unknown => {
    if (Array.isArray(node)) return node.map((n) => walk(n, false));
    if (typeof node !== 'object' || node === null) return node;
    const out: Schema = {};
    for (const [key, value] of Object.entries(node)) {
      if (DATA.has(key)) out[key] = value;
      // `properties` (and `definitions`) map names to schemas: the names are never keywords.
      else if (key === 'properties' || key === 'definitions') out[key] = mapValues(value, walk);
      else out[key] = walk(value, false);
    }
    return f(out, root);
  };
  return walk(json, true);
}

function mapValues(o: unknown, f: (v: unknown, root: boolean) => unknown): Schema {
  return Object.fromEntries(Object.entries(o as Schema).map(([k, v]) => [k, f(v, false)]));
}

/**
 * zod's JSON Schema reshaped for ajv to judge fast, and the same: a discriminated union (zod's
 * `oneOf` of objects each with its own `const` tag) goes straight to its branch by the tag
 * (ajv's `discriminator`: it tries no other branch, building no error per branch), and every
 * object below the top is its own function (a `$ref`, with ajv's `inlineRefs: false`), as one
 * function of a large schema is too big for V8 to optimise (chat's: 140 kB of code, 3x slower).
 */
export function fastSchema(json: unknown): Schema {
  const definitions: Schema = {};
  // Tags first: once split, a union's branches are `$ref`s.
  const shaped = mapSchemas(mapSchemas(json, byTag), (node, root) => {
    if (root || !node.properties) return node;
    const name = `o${Object.keys(definitions).length}`;
    definitions[name] = node;
    return { $ref: `#/definitions/${name}` };
  }) as Schema;
  return { ...shaped, definitions: { ...(shaped.definitions as Schema), ...definitions } };
}

/** A `oneOf` of objects told apart by one required `const` property, with ajv's discriminator. */
function byTag(node: Schema): Schema {
  const branches = node.oneOf as Schema[] | undefined;
  if (!branches?.length || node.discriminator) return node;
  const [first] = branches;
  const tag = ((first?.required ?? []) as string[]).find((name) =>
    branches.every(
      (b) =>
        b.type === 'object' &&
        (b.required as string[] | undefined)?.includes(name) &&
        (b.properties as Record<string, Schema> | undefined)?.[name]?.const !== undefined,
    ),
  );
  if (!tag) return node;
  const tags = branches.map((b) => (b.properties as Record<string, Schema>)[tag]!.const);
  // `type`: ajv's discriminator judges objects only; zod refuses anything else, so does this.
  if (tags.every((t) => typeof t === 'string')) {
    return { ...node, type: 'object', discriminator: { propertyName: tag } };
  }
  // ajv's discriminator takes string tags only: other tags (`ok: true`) choose by if/then.
  const { oneOf: _, ...rest } = node;
  const chain = branches.reduceRight<Schema | boolean>(
    (otherwise, branch, i) => ({
      if: { properties: { [tag]: { const: tags[i] } }, required: [tag] },
      then: branch,
      else: otherwise,
    }),
    false,
  );
  return { ...rest, type: 'object', ...(chain as Schema) };
}
