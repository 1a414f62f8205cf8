"""What a query's joins are: their sources, criteria and key, with ksqlDB's rules for each.

Two stages, in ksqlDB's order (after its AstBuilder and AstSanitizer checked the references,
:mod:`metastore.engine.references`):

- :func:`criteria` (ksqlDB's Analyzer.visitJoinedSource and JoinTree): each JOIN adds a source
  read once, on one equality whose sides each read exactly one source, one of them the joined
  source, with compatible windowing; the result is each join's :class:`JoinInfo`, oriented as
  ksqlDB's left-deep join tree is (its left side reads the sources joined so far);
- :func:`plan` (ksqlDB's LogicalPlanner.buildJoin/verifyJoin and JoinNode): stream-table and
  table-table rules (join order, the table side's primary key, foreign-key joins), the types
  of the join condition, and the result's key: a foreign-key join keeps the left table's key;
  otherwise the first join expression the projection selects among the columns equivalent to
  the key (JoinTree.viableKeyColumns), else a synthetic ``ROWKEY`` (``ROWKEY_n`` when a source
  has that name) when no source column is equivalent (FULL OUTER joins);

then :func:`result_columns` (ksqlDB's FinalProjectNode and JoinNode.validateKeyPresent) makes
the result's columns from the projection and :func:`check_physical` (JoinNode.buildStream)
applies the rules ksqlDB checks as it builds the streams: co-partitioned sources, WITHIN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlglot import exp

from metastore.catalog.exceptions import QueryError
from metastore.catalog.model import Column, DataSource
from metastore.engine import references
from metastore.formats import rules as formats
from metastore.functions import operators
from metastore.sql import types as ty
from metastore.sql.statements import ColumnRole, SourceKind

SYNTHETIC_KEY = "ROWKEY"
SYNTHETIC_KEY_DOC = "https://cnfl.io/2LV7ouS"
_TYPES = {"INNER": "[INNER] JOIN", "LEFT": "LEFT [OUTER] JOIN", "RIGHT": "RIGHT [OUTER] JOIN",
          "OUTER": "[FULL] OUTER JOIN"}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ,
                exp.NullSafeNEQ)

Resolve = Callable[[exp.Column], str]
"""The alias of the source a column reference reads (raises QueryError when none does)."""
TypeOf = Callable[[exp.Expr], ty.SqlType]
Text = Callable[[exp.Expr], str]
"""An expression as ksqlDB prints it, its columns qualified (``T.ID``, ``(T.ID = 0)``)."""


class Read(Protocol):
    """A source the query reads (analysis' SourceRead)."""

    @property
    def alias(self) -> str: ...

    @property
    def source(self) -> DataSource: ...


class Selected(Protocol):
    """An output column of the projection (analysis' _Projected)."""

    name: str
    type: ty.SqlType
    expression: exp.Expr


@dataclass(frozen=True)
class JoinInfo:
    """One JOIN, oriented as ksqlDB's join tree: ``left_expr`` reads ``left`` (a source joined
    before), ``right_expr`` reads ``right`` (the source this JOIN adds); ``flipped`` when that
    is the reverse of the order written."""

    type: str
    """INNER, LEFT, RIGHT or OUTER."""
    left: str
    left_expr: exp.Expr
    right: str
    right_expr: exp.Expr
    flipped: bool

    @property
    def written(self) -> tuple[exp.Expr, exp.Expr]:
        """The condition's sides as written."""
        if self.flipped:
            return self.right_expr, self.left_expr
        return self.left_expr, self.right_expr


@dataclass(frozen=True)
class JoinKey:
    """The key of a join's result. ``kind``: 'source' (named ``ALIAS_COLUMN`` after the chosen
    column of ``viable``), 'synthetic' (``name``, no source column is equivalent) or 'foreign'
    (the left table's key columns, ``viable``)."""

    kind: str
    name: str
    viable: tuple[tuple[str, str], ...]
    """(alias, column) pairs: the source columns equivalent to the key (for a foreign-key join,
    the left table's key columns), in ksqlDB's order."""
    chosen: tuple[str, str] | None = None
    type: ty.SqlType | None = None


@dataclass(frozen=True)
class JoinPlan:
    """A query's joins as ksqlDB plans them: each join's criteria, whether it is a foreign-key
    join, and the result's key."""

    infos: tuple[JoinInfo, ...]
    foreign: tuple[bool, ...]
    """Whether each join is a foreign-key table-table join."""
    key: JoinKey


# -- criteria ------------------------------------------------------------------------------------
def qualified_text(expression: exp.Expr, resolve: Resolve, type_of: TypeOf | None = None) -> str:
    """``expression`` as ksqlDB prints a join condition: columns qualified by their source,
    comparisons and conjunctions parenthesised, a CAST to its type's name (when typed)."""
    if isinstance(expression, exp.And | exp.Or):
        word = "AND" if isinstance(expression, exp.And) else "OR"
        return (f"({qualified_text(expression.this, resolve, type_of)} {word} "
                f"{qualified_text(expression.expression, resolve, type_of)})")
    if isinstance(expression, exp.Cast) and type_of is not None:
        return (f"CAST({qualified_text(expression.this, resolve, type_of)} AS "
                f"{type_of(expression).sql()})")
    return operators.ksql_text(expression, lambda node: qualified_column(node, resolve))


def qualified_column(node: exp.Column, resolve: Resolve) -> str:
    """``node`` qualified by the alias of its source, as written when it names none."""
    try:
        return f"{resolve(node)}.{node.name}"
    except QueryError:
        return ".".join(p for p in (node.table, node.name) if p)


def join_type(join: exp.Join) -> str:
    side, kind = (join.side or "").upper(), (join.kind or "").upper()
    if side in ("LEFT", "RIGHT"):
        return side
    if side == "FULL" or kind == "OUTER":
        return "OUTER"
    if kind == "CROSS":
        raise QueryError("Join type is not supported: CROSS")
    return "INNER"


def criteria(joins: Sequence[exp.Join], reads: Sequence[Read], resolve: Resolve,
             text: Text) -> tuple[JoinInfo, ...]:
    """Each JOIN's :class:`JoinInfo`, checking ksqlDB's Analyzer rules in its order."""
    infos: list[JoinInfo] = []
    for index, join in enumerate(joins, start=1):
        read = reads[index]
        _check_new_source(read, reads[:index])
        kind = join_type(join)
        condition = _unwrapped(join.args.get("on"))
        if condition is None:
            raise QueryError("Unsupported join expression: a JOIN needs an ON condition.")
        if not isinstance(condition, _COMPARISONS):
            if isinstance(condition, exp.And) and all(
                    isinstance(_unwrapped(side), exp.EQ)
                    for side in (condition.this, condition.expression)):
                raise QueryError("Invalid join condition: joins on multiple conditions are not "
                                 f"yet supported. Got {text(condition)}.")
            raise QueryError(f"Unsupported join expression: {text(condition)}")
        if not isinstance(condition, exp.EQ):
            raise QueryError("Only equality join criteria is supported.")
        visible = {r.alias: i for i, r in enumerate(reads[:index + 1])}
        sides = (condition.this, condition.expression)
        used = [_sources_of(side, resolve, visible) for side in sides]
        left, right = (_only_source(side, condition, found, text)
                       for side, found in zip(sides, used, strict=True))
        if left == right:
            raise QueryError("Each side of the join must reference exactly one source and not the "
                             f"same source. Left side references `{left}` and right references "
                             f"`{right}`")
        by_alias = {r.alias: r for r in reads}
        _check_windowing(by_alias[left], by_alias[right])
        if read.alias not in (left, right):
            raise QueryError(f"A join criteria is expected to reference the source "
                             f"(`{read.alias}`) in the FROM clause, instead the right source "
                             f"references `{right}` and the left source references `{left}`")
        if left == read.alias:  # the joined source is always the tree's right
            infos.append(JoinInfo(kind, right, sides[1], left, sides[0], True))
        else:
            infos.append(JoinInfo(kind, left, sides[0], right, sides[1], False))
    return tuple(infos)


def _check_new_source(read: Read, earlier: Sequence[Read]) -> None:
    """ksqlDB's Analyzer.visitAliasedRelation: a source is read once."""
    existing = next((r for r in earlier if r.source.name == read.source.name), None)
    if existing is None:
        return
    if len(earlier) > 1:
        raise QueryError("N-way joins do not support multiple occurrences of the same source. "
                         f"Source: '{read.source.name}'.")
    raise QueryError(f"Can not join '{read.source.name}' to '{existing.source.name}': self "
                     "joins are not yet supported.")


def _unwrapped(expression: exp.Expr | None) -> exp.Expr | None:
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression


def _sources_of(side: exp.Expr, resolve: Resolve, visible: dict[str, int]) -> list[str]:
    found: list[str] = []
    for column in references.columns(side):
        alias = resolve(column)
        if alias not in visible:  # a source joined later is not known yet
            shown = ".".join(p for p in (column.table, column.name) if p)
            raise QueryError(f"JOIN ON column '{shown}' cannot be resolved.")
        if alias not in found:
            found.append(alias)
    return found


def _only_source(side: exp.Expr, condition: exp.Expr, found: list[str], text: Text) -> str:
    if len(found) != 1:
        raise QueryError(f"Invalid comparison expression '{text(side)}' in join "
                         f"'{text(condition)}'. Each side of the join comparision must contain "
                         "references from exactly one source.")
    return found[0]


def _check_windowing(left: Read, right: Read) -> None:
    """ksqlDB's Analyzer.throwOnIncompatibleSourceWindowing."""
    left_window, right_window = left.source.window, right.source.window
    if (left_window is None) != (right_window is None):
        left_kind = left_window.kind if left_window is not None else "not"
        right_kind = right_window.kind if right_window is not None else "not"
        raise QueryError("Can not join windowed source to non-windowed source.\n"
                         f"`{left.alias}` is {left_kind} windowed\n"
                         f"`{right.alias}` is {right_kind} windowed")
    if left_window is None or right_window is None:
        return
    session = left_window.kind == "SESSION"
    if session != (right_window.kind == "SESSION"):
        raise QueryError(
            f"Incompatible windowed sources.\nLeft source: {left_window.kind}\nRight source: "
            f"{right_window.kind}\nSession windowed sources can only be joined to other session "
            "windowed sources, and may still not result in expected behaviour as session bounds "
            "must be an exact match for the join to work\nHopping and tumbling windowed sources "
            "can only be joined to other hopping and tumbling windowed sources")


def synthetic_key_name(reads: Sequence[Read]) -> str:
    """ksqlDB's ColumnNames.generateSyntheticJoinKey: ``ROWKEY``, or the next ``ROWKEY_n`` no
    source column has."""
    taken: set[int] = set()
    for read in reads:
        for column in read.source.columns:
            base, _, number = column.name.partition("_")
            if column.name == SYNTHETIC_KEY:
                taken.add(0)
            elif base == SYNTHETIC_KEY and number.isdigit():
                taken.add(int(number))
    index = 0
    while index in taken:
        index += 1
    return SYNTHETIC_KEY if index == 0 else f"{SYNTHETIC_KEY}_{index}"


def viable_keys(infos: Sequence[JoinInfo], resolve: Resolve) -> tuple[tuple[str, str], ...]:
    """ksqlDB's JoinTree.viableKeyColumns of the left-deep tree of ``infos``: the columns of the
    join criteria equivalent to the result's key (none after a FULL OUTER join)."""
    def column(expression: exp.Expr) -> tuple[str, str] | None:
        expression = _unwrapped(expression) or expression
        if isinstance(expression, exp.Column) and not isinstance(expression.this, exp.Star):
            return resolve(expression), expression.name
        return None

    def key_of(expression: exp.Expr) -> tuple[str, str] | str:
        found = column(expression)
        return found if found is not None else (_unwrapped(expression) or expression).sql()

    equivalent: set[tuple[str, str] | str] = set()
    viable: list[tuple[str, str]] = []
    for info in infos:
        if info.type == "OUTER":
            equivalent, viable = set(), []
            continue
        keys = {key_of(info.left_expr), key_of(info.right_expr)}
        equivalent = keys | equivalent if equivalent & keys else keys
        candidates = [*viable, column(info.left_expr), column(info.right_expr)]
        viable = []
        for candidate in candidates:
            if candidate is not None and candidate in equivalent and candidate not in viable:
                viable.append(candidate)
    return tuple(viable)


# -- the planner's rules and the key -----------------------------------------------------
def plan(infos: Sequence[JoinInfo], reads: Sequence[Read], items: Sequence[exp.Expr],
         resolve: Resolve, type_of: TypeOf, text: Text) -> JoinPlan:
    """ksqlDB's LogicalPlanner.buildJoin over the left-deep join tree, join by join."""
    by_alias = {r.alias: r for r in reads}
    foreign: list[bool] = []
    left_kind = reads[0].source.kind
    for index, info in enumerate(infos):
        right = by_alias[info.right]
        foreign.append(_verify(info, index, left_kind, right, by_alias, type_of, text))
        if not foreign[-1]:
            _check_key_types(info, left_kind, right, type_of, text)
        left_kind = (SourceKind.TABLE if left_kind is SourceKind.TABLE
                     and right.source.kind is SourceKind.TABLE else SourceKind.STREAM)
    last = infos[-1]
    if foreign[-1]:
        left = by_alias[last.left]
        key = JoinKey("foreign", "", tuple((left.alias, c.name)
                                           for c in left.source.key_columns))
    else:
        viable = viable_keys(infos, resolve)
        if not viable:
            key = JoinKey("synthetic", synthetic_key_name(reads), (),
                          type=type_of(last.left_expr))
        else:
            contained = [v for v in viable if _contains(items, v, resolve)]
            chosen = (contained or list(viable))[0]
            key = JoinKey("source", f"{chosen[0]}_{chosen[1]}", viable, chosen)
    return JoinPlan(tuple(infos), tuple(foreign), key)


def _verify(info: JoinInfo, index: int, left_kind: SourceKind, right: Read,
            by_alias: dict[str, Read], type_of: TypeOf, text: Text) -> bool:
    """ksqlDB's LogicalPlanner.verifyJoin; whether the join is a foreign-key join."""
    names = (f"{by_alias[info.left].source.name} {_TYPES[info.type]} {right.source.name}")
    shown_left, shown_right = (text(e) for e in info.written)
    if left_kind is SourceKind.STREAM:
        if right.source.kind is SourceKind.TABLE:
            if info.type == "OUTER":
                raise QueryError("Invalid join type: full-outer join not supported for "
                                 f"stream-table join. Got {names}.")
            if not _on_key(info.right_expr, right):
                raise QueryError("Invalid join condition: stream-table joins require to join on "
                                 f"the table's primary key. Got {shown_left} = {shown_right}.")
        return False
    if right.source.kind is SourceKind.STREAM:
        raise QueryError("Invalid join order: table-stream joins are not supported; only "
                         f"stream-table joins. Got {names}.")
    if not _on_key(info.right_expr, right):
        raise QueryError("Invalid join condition: table-table joins require to join on the "
                         "primary key of the right input table. Got "
                         f"{shown_left} = {shown_right}.")
    if _on_key(info.left_expr, by_alias[info.left]):
        return False
    if info.type == "OUTER":
        raise QueryError("Invalid join type: full-outer join not supported for foreign-key "
                         f"table-table join. Got {names}.")
    if index > 0:
        raise QueryError("Invalid join condition: foreign-key table-table joins are not "
                         f"supported as part of n-way joins. Got {shown_left} = {shown_right}.")
    right_key = right.source.key_columns[0].type
    _check_condition_types(info, type_of(info.left_expr), right_key, text)
    if right.source.window is not None:
        raise QueryError("Foreign-key table-table joins are not supported on windowed tables.")
    return True


def _on_key(expression: exp.Expr, read: Read) -> bool:
    """Whether ``expression`` is the one key column of ``read`` (LogicalPlanner's
    joinOnNonKeyAttribute, negated)."""
    expression = _unwrapped(expression) or expression
    keys = read.source.key_columns
    return (isinstance(expression, exp.Column) and len(keys) == 1
            and expression.name == keys[0].name)


def _check_condition_types(info: JoinInfo, left: ty.SqlType, right: ty.SqlType,
                           text: Text) -> None:
    if left == right:
        return
    (first, first_type), (second, second_type) = (
        ((info.right_expr, right), (info.left_expr, left)) if info.flipped
        else ((info.left_expr, left), (info.right_expr, right)))
    raise QueryError(f"Invalid join condition: types don't match. Got {text(first)}"
                     f"{{{first_type.sql()}}} = {text(second)}{{{second_type.sql()}}}.")


def _check_key_types(info: JoinInfo, left_kind: SourceKind, right: Read, type_of: TypeOf,
                     text: Text) -> None:
    """A primary-key table-table join compares the two keys' types (verifyJoinConditionTypes);
    any other join the keys its sides are (re)partitioned by (JoinParamsFactory)."""
    left_type, right_type = type_of(info.left_expr), type_of(info.right_expr)
    if left_kind is SourceKind.TABLE and right.source.kind is SourceKind.TABLE:
        _check_condition_types(info, left_type, right_type, text)
    elif left_type != right_type:
        raise QueryError(f"Invalid join. Key types differ: {left_type.sql()} vs "
                         f"{right_type.sql()}")


def _contains(items: Sequence[exp.Expr], column: tuple[str, str], resolve: Resolve) -> bool:
    """ksqlDB's Projection.containsExpression for a source column."""
    for item in items:
        expression = _unwrapped(item.this if isinstance(item, exp.Alias) else item) or item
        if isinstance(expression, exp.Star):
            return True
        if isinstance(expression, exp.Column) and isinstance(expression.this, exp.Star):
            if expression.table == column[0]:
                return True
            continue
        if _reads(expression, column, resolve):
            return True
    return False


def _reads(expression: exp.Expr, column: tuple[str, str], resolve: Resolve) -> bool:
    expression = _unwrapped(expression) or expression
    if not isinstance(expression, exp.Column) or expression.name != column[1]:
        return False
    try:
        return resolve(expression) == column[0]
    except QueryError:
        return False


# -- the result's columns -------------------------------------------------------------------------
def result_columns(projected: Sequence[Selected], items: Sequence[exp.Expr], joined: JoinPlan,
                   kind: SourceKind, sink: str, resolve: Resolve) -> list[Column]:
    """ksqlDB's FinalProjectNode over a join: the columns selecting the join's key are the
    result's key (once each), something is left for the value, and the key is selected."""
    role = ColumnRole.PRIMARY_KEY if kind is SourceKind.TABLE else ColumnRole.KEY
    key = joined.key
    if key.kind == "synthetic":
        keys = [p for p in projected if _is_synthetic(p.expression, key.name)]
        extra = [] if keys or not any(isinstance(_unwrapped(i), exp.Star) for i in items) else [
            Column(key.name, key.type or ty.STRING, role)]
        _check_once(keys, key.name)
        values = [p for p in projected if p not in keys]
        if not values:
            raise QueryError("The projection contains no value columns.")
        if not keys and not extra:
            raise missing_key(sink, [key.name], synthetic=True)
        return extra + [Column(k.name, k.type, role) for k in keys[:1]] + [
            Column(v.name, v.type) for v in values]
    owned = [key.chosen] if key.chosen is not None else list(key.viable)
    keys_by_column = [[p for p in projected if _reads(p.expression, c, resolve)] for c in owned]
    for column, found in zip(owned, keys_by_column, strict=True):
        _check_once(found, f"{column[0]}_{column[1]}")
    keys = [found[0] for found in keys_by_column if found]
    values = [p for p in projected if not any(p is k for k in keys)]
    if not values:
        raise QueryError("The projection contains no value columns.")
    if key.kind == "foreign":
        missing = [c for c in key.viable if not _contains(items, c, resolve)]
        if missing:
            plural = "s" if len(missing) > 1 else ""
            listed = ", ".join(f"`{name}`" for _, name in missing)
            raise QueryError(f"Primary key column{plural} missing in projection. For foreign-key "
                             "table-table joins, the projection must include all primary key "
                             f"columns from the left input table (`{missing[0][0]}`). Missing "
                             f"column{plural}: {listed}.")
    elif not any(_contains(items, v, resolve) for v in key.viable):
        raise missing_key(sink, [f"{a}.{c}" for a, c in key.viable])
    return [Column(k.name, k.type, role) for k in keys] + [Column(v.name, v.type) for v in values]


def _is_synthetic(expression: exp.Expr, name: str) -> bool:
    expression = _unwrapped(expression) or expression
    return isinstance(expression, exp.Column) and not expression.table and expression.name == name


def _check_once(keys: Sequence[Selected], key_name: str) -> None:
    aliases = sorted({k.name for k in keys})
    if len(aliases) > 1:
        listed = f"{', '.join(aliases[:-1])} and {aliases[-1]}"
        raise QueryError(f"The projection contains a key column (`{key_name}`) more than once, "
                         f"aliased as: {listed}.\nEach key column must only be in the projection "
                         "once. If you intended to copy the key into the value, then consider "
                         "using the AS_VALUE function to indicate which key reference should be "
                         "copied.")


def missing_key(sink: str, shown: list[str], synthetic: bool = False) -> QueryError:
    """ksqlDB's PlanNode.throwKeysNotIncludedError for a join: any one of the equivalent join
    expressions will do."""
    kinds = "join expression" if len(shown) == 1 else "join expressions"
    listed = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    link = f"See {SYNTHETIC_KEY_DOC}." if synthetic else ""
    note = (f"\n{shown[0]} was added as a synthetic key column because the join criteria did "
            "not match any source column. This expression must be included in the projection "
            "and may be aliased. ") if synthetic else ""
    return QueryError(f"Key missing from projection (ie, SELECT). {link}\nThe query used to "
                      f"build {sink} must include the {kinds} {listed} in its projection "
                      f"(eg, SELECT {shown[0]}...).{note}")


# -- the physical plan ----------------------------------------------------------------------------
def check_physical(joined: JoinPlan, reads: Sequence[Read], within: bool, resolve: Resolve,
                   type_of: TypeOf) -> None:
    """ksqlDB's JoinNode.buildStream, from the root join down its left-deep tree: the sides of a
    (non foreign-key) join read topics with as many partitions; a stream-stream join needs a
    WITHIN window and no other join takes one (``within``: the query has one; its joins' own
    are not told apart, so that rule stands for a single join only); a foreign-key join is
    no RIGHT join; a side not keyed by its join expression is repartitioned
    (:func:`_check_side`)."""
    by_alias = {r.alias: r for r in reads}

    def build(index: int) -> None:
        info = joined.infos[index]
        right = by_alias[info.right]
        if not joined.foreign[index]:
            _check_partitions(reads[0].alias, reads[index].source.partitions, right)
        tables = all(r.source.kind is SourceKind.TABLE for r in reads[:index + 1])
        streams = right.source.kind is SourceKind.STREAM
        if not tables and streams and not within:
            raise QueryError("Stream-Stream joins must have a WITHIN clause specified. None was "
                             "provided. To learn about how to specify a WITHIN clause with a "
                             "stream-stream join, please visit: https://docs.confluent.io/"
                             "current/ksql/docs/syntax-reference.html#create-stream-as-select")
        if index == 0:
            _check_side(info.left_expr, by_alias[info.left], right, resolve, type_of)
        if within and len(joined.infos) == 1 and not (streams and not tables):
            which = "Table-Table" if tables else "Stream-Table"
            raise QueryError(
                f"A window definition was provided for a {which} join. These joins are not "
                "windowed. Please drop the window definition "
                + ("(i.e. the WITHIN clause) and try to execute your Table-Table join again."
                   if tables else "(ie. the WITHIN clause) and try to execute your join again."))
        if index > 0:
            build(index - 1)
        if not joined.foreign[index]:
            _check_side(info.right_expr, right, by_alias[info.left], resolve, type_of)
        if joined.foreign[index] and info.type == "RIGHT":
            raise QueryError("RIGHT OUTER JOIN on a foreign key is not supported")

    build(len(joined.infos) - 1)


def _check_side(expression: exp.Expr, read: Read, other: Read, resolve: Resolve,
                type_of: TypeOf) -> None:
    """A source read by a join (ksqlDB's PreJoinRepartitionNode and SchemaKStream.selectKey):
    one not keyed by its join expression is repartitioned by it, and so is a windowed one whose
    key format differs from the other side's (unless its format infers schemas: then it is
    always repartitioned, to the join's key format); a windowed source cannot be, and a
    repartition's key cannot be a map (GenericKeySerDe)."""
    source = read.source
    needed = not _on_key(expression, read)
    if source.window is not None:
        fmt = formats.lookup(source.key_format)
        forced = fmt is not None and fmt.infers_schema
        other_format = (other.source.key_format, other.source.window)
        changes = other_format != (source.key_format, source.window)
        if needed or (changes and not forced):
            raise QueryError("Implicit repartitioning of windowed sources is not supported. "
                             "See https://github.com/confluentinc/ksql/issues/4385.")
    if not needed:
        return
    key_type = type_of(expression)
    if ty.contains_map(key_type):
        unwrapped = _unwrapped(expression) or expression
        name = (f"{resolve(unwrapped)}_{unwrapped.name}" if isinstance(unwrapped, exp.Column)
                else "KSQL_COL_0")
        raise QueryError("Map keys, including types that contain maps, are not supported as they "
                         "may lead to unexpected behavior due to inconsistent serialization. Key "
                         f"column name: `{name}`. Column type: {ty.backticked(key_type)}. See "
                         "https://github.com/confluentinc/ksql/issues/6621 for more.")


def _check_partitions(first: str, left: int | None, right: Read) -> None:
    """ksqlDB's JoinNode.ensureMatchingPartitionCounts: a join's left side counts as its
    tree's last-joined source and is named after the FROM source."""
    count = right.source.partitions
    if left is None or count is None or left == count:
        return
    raise QueryError(f"Can't join `{first}` with `{right.alias}` since the number of partitions "
                     f"don't match. `{first}` partitions = {left}; `{right.alias}` partitions = "
                     f"{count}. Please repartition either one so that the number of partitions "
                     "match.")
