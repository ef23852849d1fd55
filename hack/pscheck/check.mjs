// Parses each PowerShell file named on the command line with the
// tree-sitter PowerShell grammar and reports every syntax error with its
// line; exits 1 if any file has one. A grammar checks syntax, not cmdlet
// names or parameters.
//
// With --commands first, it prints instead one JSON line per file: every
// command word the file invokes (name, as written; expr, true when it is
// an expression after & or ., such as a quoted path or a variable; eap,
// the $ErrorActionPreference a literal assignment puts in force there, or
// "" when the file sets none) and the functions the file defines, for
// hwk's checks that every cmdlet is called by its module-qualified name
// and that no native program runs while errors stop the script.
import { readFileSync } from 'node:fs';
import Parser from 'tree-sitter';
import PowerShell from 'tree-sitter-powershell';

const parser = new Parser();
parser.setLanguage(PowerShell);

// errorPreference is the value an assignment of a string literal to
// $ErrorActionPreference sets, or undefined for any other node.
const errorPreference = (node) => {
  if (node.type !== 'assignment_expression') return undefined;
  const left = node.children.find((c) => c.type === 'left_assignment_expression');
  if (!left || left.text.trim().toLowerCase() !== '$erroractionpreference') return undefined;
  const right = node.children[node.children.length - 1];
  const m = /^\s*(['"])(\w+)\1\s*$/.exec(right.text);
  return m ? m[2] : undefined;
};

// The first preference a function sets at the top of its own body: the
// one its script block parameters run under when it invokes them
// (PowerShell scopes are dynamic, so a block runs in its caller's scope).
const functionPreference = (fn) => {
  const body = fn.descendantsOfType('script_block')[0];
  const list = body && body.descendantsOfType('statement_list')[0];
  if (!list) return undefined;
  for (const stmt of list.children) {
    const assign = stmt.descendantsOfType('assignment_expression')[0];
    const v = assign && errorPreference(assign);
    if (v) return v;
  }
  return undefined;
};

const args = process.argv.slice(2);
if (args[0] === '--commands') {
  for (const file of args.slice(1)) {
    const tree = parser.parse(readFileSync(file, 'utf8'));
    const commands = [];
    const functions = [];
    const preferences = {};
    for (const fn of tree.rootNode.descendantsOfType('function_statement')) {
      const name = fn.children.find((c) => c.type === 'function_name');
      if (!name) continue;
      functions.push(name.text);
      const v = functionPreference(fn);
      if (v) preferences[name.text] = v;
    }
    // A scope is what an assignment changes: the file, a function body
    // or a script block; if/try/loop bodies share their scope's.
    const walk = (node, scope) => {
      if (node.type === 'command_name') commands.push({ name: node.text, expr: false, eap: scope.eap });
      if (node.type === 'command_name_expr') commands.push({ name: node.text, expr: true, eap: scope.eap });
      let inner = scope;
      if (node.type === 'function_statement') inner = { eap: scope.eap };
      if (node.type === 'script_block_expression') {
        // A block handed to one of the file's functions runs under the
        // preference that function sets; any other runs under this one.
        let cmd = node.parent;
        while (cmd && cmd.type !== 'command' && cmd.type !== 'script_block') cmd = cmd.parent;
        const callee = cmd && cmd.type === 'command' && cmd.children.find((c) => c.type === 'command_name');
        inner = { eap: (callee && preferences[callee.text]) || scope.eap };
      }
      for (const child of node.children) walk(child, inner);
      const v = errorPreference(node);
      if (v) scope.eap = v;
    };
    walk(tree.rootNode, { eap: '' });
    console.log(JSON.stringify({ file, error: tree.rootNode.hasError, commands, functions }));
  }
  process.exit(0);
}

let failed = false;
for (const file of args) {
  const tree = parser.parse(readFileSync(file, 'utf8'));
  if (!tree.rootNode.hasError) {
    console.log(`ok ${file}`);
    continue;
  }
  failed = true;
  const walk = (node) => {
    if (node.isError || node.isMissing) {
      const kind = node.isMissing ? `missing ${node.type}` : 'unexpected';
      console.log(`${file}:${node.startPosition.row + 1}:${node.startPosition.column + 1}: ${kind}: ${JSON.stringify(node.text.slice(0, 60))}`);
      return;
    }
    for (const child of node.children) walk(child);
  };
  walk(tree.rootNode);
}
process.exit(failed ? 1 : 0);
