// Parses each PowerShell file named on the command line with the
// tree-sitter PowerShell grammar and reports every syntax error with its
// line; exits 1 if any file has one. A grammar checks syntax, not cmdlet
// names or parameters.
import { readFileSync } from 'node:fs';
import Parser from 'tree-sitter';
import PowerShell from 'tree-sitter-powershell';

const parser = new Parser();
parser.setLanguage(PowerShell);

let failed = false;
for (const file of process.argv.slice(2)) {
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
