// Parses each PowerShell file named on the command line with the
// tree-sitter PowerShell grammar and reports every syntax error with its
// line; exits 1 if any file has one. A grammar checks syntax, not cmdlet
// names or parameters.
//
// With --commands first, it prints instead one JSON line per file: every
// command word the file invokes (name, as written; expr, true when it is
// an expression after & or ., such as a quoted path or a variable) and
// the functions the file defines, for hwk's check that every cmdlet is
// called by its module-qualified name.
import { readFileSync } from 'node:fs';
import Parser from 'tree-sitter';
import PowerShell from 'tree-sitter-powershell';

const parser = new Parser();
parser.setLanguage(PowerShell);

const args = process.argv.slice(2);
if (args[0] === '--commands') {
  for (const file of args.slice(1)) {
    const tree = parser.parse(readFileSync(file, 'utf8'));
    const commands = [];
    const functions = [];
    const walk = (node) => {
      if (node.type === 'command_name') commands.push({ name: node.text, expr: false });
      if (node.type === 'command_name_expr') commands.push({ name: node.text, expr: true });
      if (node.type === 'function_statement') {
        const name = node.children.find((c) => c.type === 'function_name');
        if (name) functions.push(name.text);
      }
      for (const child of node.children) walk(child);
    };
    walk(tree.rootNode);
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
