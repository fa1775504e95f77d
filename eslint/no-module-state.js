// ESLint rule: no state at module level outside src/config.ts (issue 25, STYLE.md: state lives in the objects a
// factory builds, so two instances of the app in one process, as the tests run them, share nothing by accident).
// Flags, at the top level of a module: `let` and `var` declarations; a `const` Map, Set, WeakMap or WeakSet that the
// module mutates (`.set`, `.add`, `.delete`, `.clear`: a cache or registry; a lookup set built once is fine); and calls
// made for their effect on import (`pg.types.setTypeParser(...)`).

const CONTAINERS = new Set(['Map', 'Set', 'WeakMap', 'WeakSet']);
const MUTATORS = new Set(['set', 'add', 'delete', 'clear']);

/** Whether a reference to the variable calls one of its mutators (`x.set(...)`). */
const mutates = (ref) => {
  const id = ref.identifier;
  const member = id.parent;
  return (
    member?.type === 'MemberExpression' && member.object === id && !member.computed && MUTATORS.has(member.property.name) && member.parent?.type === 'CallExpression' && member.parent.callee === member
  );
};

/** Calls at the top level that only declare or wire things, never mutate shared state. */
const ALLOWED_TOP_LEVEL_CALLS = new Set(['describe', 'it']);

export default {
  meta: {
    type: 'problem',
    docs: { description: 'no mutable state at module level (state belongs to the objects a factory builds)' },
    schema: [],
    messages: {
      binding: "module-level '{{kind}}' {{name}}: keep state in the object a factory builds (or in config.ts)",
      container: 'module-level {{type}} {{name}} that the module mutates: a cache shared by every instance; build it in a factory',
      effect: 'a call made for its effect on import: do it where the object that needs it is built',
    },
  },
  create(context) {
    return {
      'Program > VariableDeclaration, Program > ExportNamedDeclaration > VariableDeclaration'(node) {
        for (const decl of node.declarations) {
          const name = decl.id.type === 'Identifier' ? decl.id.name : '(pattern)';
          if (node.kind !== 'const') {
            context.report({ node: decl, messageId: 'binding', data: { kind: node.kind, name } });
            continue;
          }
          const init = decl.init;
          if (init?.type === 'NewExpression' && init.callee.type === 'Identifier' && CONTAINERS.has(init.callee.name)) {
            const [variable] = context.sourceCode.getDeclaredVariables(decl);
            if (variable?.references.some(mutates)) context.report({ node: decl, messageId: 'container', data: { type: init.callee.name, name } });
          }
        }
      },
      'Program > ExpressionStatement'(node) {
        let e = node.expression;
        if (e.type === 'AwaitExpression') e = e.argument;
        if (e.type !== 'CallExpression') return;
        if (e.callee.type === 'Identifier' && ALLOWED_TOP_LEVEL_CALLS.has(e.callee.name)) return;
        context.report({ node, messageId: 'effect' });
      },
    };
  },
};
