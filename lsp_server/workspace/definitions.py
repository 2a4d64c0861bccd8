"""The definitions a file offers other files: top-level functions and types and the methods of
classes, each as a one-line signature and the first line of its documentation, read with
tree-sitter (Python, JavaScript/TypeScript, Go, Rust)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from lsp_server.config.tuning import SIGNATURE_CHARS
from lsp_server.text.languages import COMMENT_NODES, definitions_reader
from lsp_server.text.syntax import parse


@dataclass(frozen=True, slots=True)
class Definition:
    name: str
    kind: str  # function, method, class, interface, type, struct, enum, trait
    path: str  # relative to the root, with "/"
    line: int  # 0-based
    signature: str  # the header on one line, without the body
    doc: str  # first line of the docstring or of the comment above; "" if none


OPEN_SPACE = re.compile(r"([(\[]) ")
SPACE_CLOSE = re.compile(r",? ([)\]])")
COMMENT_MARKS = re.compile(r"^\s*(?:/\*\*?|\*/|///?!?|\*(?!/))?\s*(.*?)\s*(?:\*/)?\s*$")


def extract_definitions(language_id: str, text: str, rel: str) -> tuple[Definition, ...]:
    """Top-level functions and types, and the methods of classes, impls and traits (not what
    is defined inside function bodies: those are not callable from elsewhere)."""
    tree = parse(language_id, text)
    if tree is None:
        return ()
    found = _Found(text.encode("utf-8"), rel, [])
    reader = definitions_reader(language_id)
    if reader == "python":
        found.python(tree.root_node, in_class=False)
    elif reader == "javascript":
        found.javascript(tree.root_node)
    elif reader == "go":
        found.go(tree.root_node)
    elif reader == "rust":
        found.rust(tree.root_node, container=False)
    return tuple(found.out)


@dataclass
class _Found:
    source: bytes
    rel: str
    out: list[Definition]

    def text(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "replace")

    def add(
        self,
        kind: str,
        node: Node,
        name: Node | None,
        header_end: int,
        outer: Node | None = None,
        doc: str | None = None,
        prefix: str = "",
    ) -> None:
        """`node` defines `name`; its header runs from `outer` (an export statement around it;
        decorators are left out) to `header_end`; its doc, unless given, is the comment above
        `outer`."""
        if name is None:
            return
        outer = outer or node
        self.out.append(
            Definition(
                name=self.text(name.start_byte, name.end_byte),
                kind=kind,
                path=self.rel,
                line=node.start_point[0],
                signature=_one_line(prefix + self.text(outer.start_byte, header_end)),
                doc=self.comment_above(outer) if doc is None else doc,
            )
        )

    def comment_above(self, node: Node) -> str:
        """First line of the comments right above `node` (attributes between them skipped)."""
        comments: list[Node] = []
        top = node.start_point[0]
        sibling = node.prev_named_sibling
        while sibling is not None:
            end_row = sibling.end_point[0] - (1 if sibling.end_point[1] == 0 else 0)
            if end_row < top - 1:
                break
            if sibling.type in COMMENT_NODES:
                comments.append(sibling)
            elif sibling.type != "attribute_item":
                break
            top = sibling.start_point[0]
            sibling = sibling.prev_named_sibling
        for comment in reversed(comments):
            for line in self.text(comment.start_byte, comment.end_byte).split("\n"):
                match = COMMENT_MARKS.match(line)
                if match and match.group(1):
                    return match.group(1)[:SIGNATURE_CHARS]
        return ""

    # Python

    def python(self, node: Node, in_class: bool) -> None:
        for child in node.named_children:
            target = child
            if child.type == "decorated_definition":
                target = child.child_by_field_name("definition") or child
            if target.type not in ("function_definition", "class_definition"):
                continue
            body = target.child_by_field_name("body")
            if body is None:
                continue
            end = body.start_byte
            for part in target.children:
                if part.type == ":" and part.end_byte <= end:
                    end = part.end_byte  # the header's colon, before any comment
                    break
            if target.type == "class_definition":
                kind = "class"
            else:
                kind = "method" if in_class else "function"
            name = target.child_by_field_name("name")
            self.add(kind, target, name, end, doc=self.docstring(body))
            if target.type == "class_definition":
                self.python(body, in_class=True)

    def docstring(self, body: Node) -> str:
        """First line of a Python body's docstring."""
        first = next((c for c in body.named_children if c.type != "comment"), None)
        if first is None or first.type != "expression_statement" or not first.named_children:
            return ""
        string = first.named_children[0]
        content = next((c for c in string.named_children if c.type == "string_content"), None)
        if string.type != "string" or content is None:
            return ""
        for line in self.text(content.start_byte, content.end_byte).split("\n"):
            if line.strip():
                return line.strip()[:SIGNATURE_CHARS]
        return ""

    # JavaScript / TypeScript

    def javascript(self, node: Node) -> None:
        for child in node.named_children:
            decl = child
            if child.type == "export_statement":
                decl = child.child_by_field_name("declaration")
                if decl is None:
                    continue
            kind = {
                "function_declaration": "function",
                "generator_function_declaration": "function",
                "class_declaration": "class",
                "abstract_class_declaration": "class",
                "interface_declaration": "interface",
                "enum_declaration": "enum",
            }.get(decl.type)
            name = decl.child_by_field_name("name")
            if kind is not None:
                body = decl.child_by_field_name("body")
                end = body.start_byte if body is not None else decl.end_byte
                self.add(kind, decl, name, end, child)
                if kind == "class" and body is not None:
                    self.javascript_class(body)
            elif decl.type == "type_alias_declaration":
                value = decl.child_by_field_name("value")
                end = (
                    value.start_byte
                    if value is not None and value.type == "object_type"
                    else decl.end_byte
                )
                self.add("type", decl, name, end, child)
            elif decl.type in ("lexical_declaration", "variable_declaration"):
                for declarator in decl.named_children:
                    value = declarator.child_by_field_name("value")
                    if declarator.type != "variable_declarator" or value is None:
                        continue
                    if value.type in ("arrow_function", "function_expression", "function"):
                        body = value.child_by_field_name("body")
                        end = body.start_byte if body is not None else value.end_byte
                        self.add(
                            "function", decl, declarator.child_by_field_name("name"), end, child
                        )

    def javascript_class(self, body: Node) -> None:
        for member in body.named_children:
            name = member.child_by_field_name("name")
            if member.type in (
                "method_definition",
                "abstract_method_signature",
                "method_signature",
            ):
                inner = member.child_by_field_name("body")
                self.add("method", member, name, inner.start_byte if inner else member.end_byte)
            elif member.type in ("public_field_definition", "field_definition"):
                value = member.child_by_field_name("value")
                if value is not None and value.type in ("arrow_function", "function_expression"):
                    inner = value.child_by_field_name("body")
                    end = inner.start_byte if inner is not None else value.end_byte
                    self.add("method", member, name or member.child_by_field_name("property"), end)

    # Go

    def go(self, node: Node) -> None:
        for child in node.named_children:
            if child.type in ("function_declaration", "method_declaration"):
                body = child.child_by_field_name("body")
                kind = "function" if child.type == "function_declaration" else "method"
                end = body.start_byte if body is not None else child.end_byte
                self.add(kind, child, child.child_by_field_name("name"), end)
            elif child.type == "type_declaration":
                specs = [s for s in child.named_children if s.type in ("type_spec", "type_alias")]
                grouped = any(c.type == "(" for c in child.children)
                for spec in specs:
                    self.go_type(child, spec, grouped)

    def go_type(self, declaration: Node, spec: Node, grouped: bool) -> None:
        value = spec.child_by_field_name("type")
        kind = {"struct_type": "struct", "interface_type": "interface"}.get(
            value.type if value is not None else "", "type"
        )
        end = spec.end_byte
        if value is not None and kind != "type":
            brace = next(
                (c for c in value.children if c.type in ("{", "field_declaration_list")), None
            )
            end = brace.start_byte if brace is not None else value.end_byte
        name = spec.child_by_field_name("name")
        if grouped:  # "A int" inside `type ( ... )`: the header says what it is
            self.add(kind, spec, name, end, prefix="type ")
        else:
            self.add(kind, spec, name, end, declaration)

    # Rust

    def rust(self, node: Node, container: bool) -> None:
        for child in node.named_children:
            body = child.child_by_field_name("body")
            name = child.child_by_field_name("name")
            if child.type in ("function_item", "function_signature_item"):
                end = body.start_byte if body is not None else child.end_byte
                self.add("method" if container else "function", child, name, end)
            elif child.type in ("struct_item", "enum_item", "trait_item", "union_item"):
                kind = child.type.removesuffix("_item")
                braced = body is not None and body.type != "ordered_field_declaration_list"
                self.add(kind, child, name, body.start_byte if braced else child.end_byte)
                if child.type == "trait_item" and body is not None:
                    self.rust(body, container=True)
            elif child.type == "impl_item" and body is not None:
                self.rust(body, container=True)
            elif child.type == "mod_item" and body is not None:
                self.rust(body, container=False)


def _one_line(header: str) -> str:
    """A header on one line: whitespace collapsed, none just inside brackets (nor a trailing
    comma before the closing one: multi-line parameter lists), no trailing `;`."""
    text = " ".join(header.split()).rstrip(";").rstrip()
    if "( " in text or "[ " in text:
        text = OPEN_SPACE.sub(r"\1", text)
    if " )" in text or " ]" in text:
        text = SPACE_CLOSE.sub(r"\1", text)
    if len(text) > SIGNATURE_CHARS:
        text = text[: SIGNATURE_CHARS - 1].rstrip() + "…"
    return text
