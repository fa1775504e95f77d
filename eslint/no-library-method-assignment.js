// ESLint rule: no function assigned over a property of a library's object (issue 25: libraries through their public
// APIs only). A replaced `app.handle`, a reassigned `router.matchOperation` or an overridden `client._query` makes every
// upgrade of the library forensic work; use its options, its documented hooks, or code of our own beside it.
//
// Without type information the rule follows where the assigned-to object comes from, through casts, `const`
// initialisers, member chains, `new`/calls and a class's `extends`, to an import from a package (`express`,
// `node:http`, ...) or to a parameter typed by such an import (`app: Express`). Objects of our own are not concerned.

/** `x as T`, `x!`, `<T>x`, `x satisfies T`, `await x`, `(x)` -> x */
function strip(node) {
  while (node && ['TSAsExpression', 'TSNonNullExpression', 'TSTypeAssertion', 'TSSatisfiesExpression', 'AwaitExpression', 'ChainExpression'].includes(node.type))
    node = node.expression ?? node.argument;
  return node;
}

const isFunctionLike = (node) => {
  const n = strip(node);
  return (
    n?.type === 'ArrowFunctionExpression' ||
    n?.type === 'FunctionExpression' ||
    (n?.type === 'CallExpression' && n.callee.type === 'MemberExpression' && !n.callee.computed && n.callee.property.name === 'bind')
  );
};

const isPackageSource = (source) => typeof source === 'string' && !source.startsWith('.') && !source.startsWith('/');

function findVariable(scope, name) {
  for (let s = scope; s; s = s.upper) {
    const v = s.set.get(name);
    if (v) return v;
  }
  return null;
}

/** The package an expression's value comes from, or null when it is ours (or cannot be told). */
function libraryOf(node, scope, seen = new Set()) {
  node = strip(node);
  if (!node || seen.has(node) || seen.size > 20) return null;
  seen.add(node);
  switch (node.type) {
    case 'MemberExpression':
      return libraryOf(node.object, scope, seen);
    case 'NewExpression':
    case 'CallExpression':
      return libraryOf(node.callee, scope, seen);
    case 'ClassDeclaration':
    case 'ClassExpression':
      return node.superClass ? libraryOf(node.superClass, scope, seen) : null;
    case 'Identifier': {
      const variable = findVariable(scope, node.name);
      const def = variable?.defs[0];
      if (!def) return null;
      if (def.type === 'ImportBinding') return isPackageSource(def.parent.source.value) ? def.parent.source.value : null;
      if (def.type === 'ClassName') return libraryOf(def.node, scope, seen);
      if (def.type === 'Variable' && def.parent.kind === 'const' && def.node.init && def.node.id.type === 'Identifier') return libraryOf(def.node.init, scope, seen);
      if (def.type === 'Parameter') {
        const annotation = def.name.typeAnnotation?.typeAnnotation;
        if (annotation?.type === 'TSTypeReference') {
          let name = annotation.typeName;
          while (name.type === 'TSQualifiedName') name = name.left;
          return libraryOf(name, scope, seen);
        }
      }
      return null;
    }
    default:
      return null;
  }
}

export default {
  meta: {
    type: 'problem',
    docs: { description: "disallow assigning a function over a property of a library's object (use its public API)" },
    schema: [],
    messages: { patched: "Do not assign over `{{property}}` of an object of '{{library}}': use the library's public API (options, documented hooks) or code of our own beside it." },
  },
  create(context) {
    return {
      AssignmentExpression(node) {
        if (node.operator !== '=' || node.left.type !== 'MemberExpression' || !isFunctionLike(node.right)) return;
        const library = libraryOf(node.left.object, context.sourceCode.getScope(node));
        if (!library) return;
        const property = node.left.computed ? context.sourceCode.getText(node.left.property) : node.left.property.name;
        context.report({ node, messageId: 'patched', data: { property, library } });
      },
    };
  },
};
