/**
 * The deepest nesting of objects and arrays a request body may have. JSON.parse takes any
 * depth, but what walks a value recursively afterwards (JSON.stringify of a tool's schema for
 * its count and for the upstream, validation) overflows the stack at some thousands of levels:
 * a body nested 100,000 deep in a tool's parameters was a 500 and, in a field forwarded as it
 * is, a request the upstream dropped. Real bodies nest a few dozen levels at most (message,
 * content block, tool result, a JSON schema's properties).
 */
export const MAX_JSON_DEPTH = 128;

/** Whether `value` nests objects or arrays more than `max` levels deep (iterative: any depth). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const stack: Array<[object, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (depth > max) return true;
    // Every request is walked: no array of values is built per node.
    if (Array.isArray(node)) {
      for (const child of node as unknown[]) push(stack, child, depth + 1);
    } else {
      for (const key in node) push(stack, (node as Record<string, unknown>)[key], depth + 1);
    }
  }
  return false;
}

function push(stack: Array<[object, number]>, child: unknown, depth: number): void {
  if (typeof child === 'object' && child !== null) stack.push([child, depth]);
}
