/**
 * The public API as text: for every `exports` entry of package.json, each exported name with its
 * kind and its type as the TypeScript checker prints it. Independent of which file declares a
 * name, so moving code between files changes nothing here; changing what apps and models can
 * call does. `npx tsx test/architecture/public-api.ts > test/architecture/public-api.txt`
 * rewrites the record after an intended change.
 */

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { packageRoot } from '../../server-kit/package-root.ts';

interface ExportEntry {
  readonly types?: string;
}

export function describePublicApi(): string {
  const root = packageRoot();
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, ExportEntry | string> };
  const entries = Object.entries(manifest.exports).flatMap(([name, entry]) =>
    typeof entry === 'object' && entry.types ? [[name, join(root, entry.types)] as const] : [],
  );
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => undefined },
  );
  if (!config) throw new Error('tsconfig.json could not be read');
  const program = ts.createProgram(
    entries.map(([, file]) => file),
    { ...config.options, noEmit: true },
  );
  const checker = program.getTypeChecker();
  const flags = ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.UseFullyQualifiedType | ts.TypeFormatFlags.WriteArrowStyleSignature;
  const lines: string[] = [];
  for (const [name, file] of entries) {
    const source = program.getSourceFile(file);
    if (!source) throw new Error(`${file} is not in the program`);
    const moduleSymbol = checker.getSymbolAtLocation(source);
    lines.push(`## arclight${name === '.' ? '' : name.slice(1)}`);
    if (!moduleSymbol) continue;
    const exported = checker.getExportsOfModule(moduleSymbol).sort((a, b) => a.name.localeCompare(b.name));
    for (const symbol of exported) {
      const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
      const kinds: string[] = [];
      if (target.flags & ts.SymbolFlags.Value)
        kinds.push(`value: ${checker.typeToString(checker.getTypeOfSymbol(target), undefined, flags)}`);
      if (target.flags & ts.SymbolFlags.Type) {
        const declared = checker.getDeclaredTypeOfSymbol(target);
        kinds.push(`type: ${checker.typeToString(declared, undefined, flags)}`);
        // An interface or class prints as its name: spell out its members, one level deep.
        if (target.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class)) {
          for (const member of checker.getPropertiesOfType(declared)) {
            if (member.name.startsWith('#') || member.name.startsWith('__')) continue;
            const declaration = member.valueDeclaration ?? member.declarations?.[0];
            if (declaration && ts.getCombinedModifierFlags(declaration) & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) continue;
            const optional = member.flags & ts.SymbolFlags.Optional ? '?' : '';
            const memberType = declaration ? checker.getTypeOfSymbolAtLocation(member, declaration) : checker.getTypeOfSymbol(member);
            kinds.push(`\n    ${member.name}${optional}: ${checker.typeToString(memberType, undefined, flags)}`);
          }
        }
      }
      lines.push(`${symbol.name} — ${kinds.join(' | ').replace(/ \| \n/g, '\n') || 'namespace'}`);
    }
  }
  // Fully qualified names print the declaring file's path: keep only the name.
  return `${lines
    .join('\n')
    .replace(/import\("[^"]+"(?:, \{ with: \{ "resolution-mode": "import" \} \})?\)\./g, '')
    .replace(/import\("[^"]*node_modules\/([^"]+)"\)/g, 'import("$1")')}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) process.stdout.write(describePublicApi());
