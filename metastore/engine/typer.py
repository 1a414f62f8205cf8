"""The types of a query's expressions, as ksqlDB types them: :class:`ExpressionTyper` over a
:class:`~metastore.engine.scope.Scope` (columns, literals, operators, casts, functions and their
lambdas, struct dereferences), and SQL types read from sqlglot's (``CAST``, custom types)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from sqlglot import exp

from metastore.catalog.exceptions import QueryError
from metastore.engine import joins as join_rules
from metastore.engine.expression_forms import deref_name, function_name, unparenthesised
from metastore.engine.pseudo_columns import WINDOW_BOUNDS
from metastore.engine.scope import Scope
from metastore.functions import casts, operators
from metastore.functions import library as functions
from metastore.functions.datetime import partial_timestamp_millis
from metastore.functions.registry import (
    TIME_UNITS,
    Argument,
    FunctionError,
    LambdaArgument,
    UnitArgument,
)
from metastore.sql import types as ty
from metastore.sql.statements import Query


class ExpressionTyper:
    def __init__(self, scope: Scope, custom: dict[str, ty.SqlType]) -> None:
        self.scope = scope
        self.custom = custom
        self.clause = "SELECT"
        self.lambda_scopes: list[dict[str, ty.SqlType]] = []

    def type_of(self, node: exp.Expr) -> ty.SqlType:
        """The ksqlDB type of ``node``, also recorded in its ``meta`` for the translation."""
        return functions.annotate(node, self._type_of(node))

    def _type_of(self, node: exp.Expr) -> ty.SqlType:
        symbol = operators.arithmetic_symbol(node)
        if symbol is not None and isinstance(node, exp.Binary):  # no extra frame: chains are deep
            self.type_of(node.left)
            self.type_of(node.right)
            return self._arithmetic(symbol, node)
        found = self._leaf_type(node)
        if found is None:
            found = self._operation_type(node)
        if found is None:
            found = self._composite_type(node)
        if found is None:
            raise QueryError(f"Unsupported expression: {node.sql()}")
        return found

    def _leaf_type(self, node: exp.Expr) -> ty.SqlType | None:
        """The type of a column, a lambda's variable, a literal, or a parenthesised or negated
        expression; None for other nodes."""
        if isinstance(node, exp.Column) and not node.table and (
                bound := self._lambda_variable(node.name)) is not None:
            return bound
        if isinstance(node, exp.Paren):
            return self.type_of(node.this)
        if isinstance(node, exp.Column):
            return self._column(node)
        if isinstance(node, exp.Literal):
            return self._literal(node)
        if isinstance(node, exp.Boolean):
            return ty.BOOLEAN
        if isinstance(node, exp.Null):
            return ty.STRING
        if isinstance(node, exp.Neg):
            negated = self.type_of(node.this)
            if isinstance(node.this, exp.Literal) and str(node.this.this).isdigit():
                return _integer_literal_type(-int(str(node.this.this)))  # -2147483648: INTEGER
            return negated
        return None

    def _column(self, node: exp.Column) -> ty.SqlType:
        if isinstance(node.this, exp.Star):
            raise QueryError("'*' is only allowed in the projection.")
        if (self.clause == "WHERE" and self.scope.windowed and not node.table
                and node.name in WINDOW_BOUNDS
                and all(s.window is None for s in self.scope.by_alias.values())):
            # the filter runs on the unwindowed input: only the aggregation has the bounds
            raise QueryError(f"Error in WHERE expression: Unknown column {node.name}.")
        return self.scope.resolve(node.name, node.table or None, self.clause, node)[1]

    def _operation_type(self, node: exp.Expr) -> ty.SqlType | None:
        """The type of a comparison, logical or concatenation operator, or a CAST;
        None for other nodes."""
        operator_type = self._operator(node)
        if operator_type is not None:
            return operator_type
        if isinstance(node, exp.Not | exp.And | exp.Or | exp.Predicate | exp.Is | exp.In |
                      exp.Between | exp.Like | exp.ILike | exp.Escape):
            for operand in node.iter_expressions():
                self.type_of(operand)
            return ty.BOOLEAN
        if isinstance(node, exp.DPipe):
            return ty.STRING
        return None

    def _composite_type(self, node: exp.Expr) -> ty.SqlType | None:
        """The type of a CASE, IF, dereference, subscript, constructor or function call; None
        for other nodes."""
        if isinstance(node, exp.Case) and node.args.get("this") is None:
            return self._searched_case(node)
        if isinstance(node, exp.Case):
            for branch in node.iter_expressions():
                self.type_of(branch)
            ifs = node.args.get("ifs") or []
            return self.type_of(ifs[0].args["true"]) if ifs else ty.STRING
        if isinstance(node, exp.If):
            return self.type_of(node.args["true"])
        if isinstance(node, exp.JSONExtract | exp.Dot):
            return self._deref(node)
        if isinstance(node, exp.Bracket):
            return self._subscript(node)
        if isinstance(node, exp.Array):
            return self._constructor("ARRAY", list(node.expressions))
        if isinstance(node, exp.PropertyEQ | exp.Alias):
            return self.type_of(node.expression if isinstance(node, exp.PropertyEQ) else node.this)
        if isinstance(node, exp.Func):
            return self._function(node)
        return None

    def _subscript(self, node: exp.Bracket) -> ty.SqlType:
        container = self.type_of(node.this)
        if isinstance(container, ty.ArrayType):
            return container.element
        if isinstance(container, ty.MapType):
            return container.value
        raise QueryError(f"Cannot index a value of type {container.sql()}.")

    def _operator(self, node: exp.Expr) -> ty.SqlType | None:
        """The type of an operator or CAST, checked by ksqlDB's rules
        (:mod:`metastore.functions.operators`, :mod:`metastore.functions.casts`); None for
        other nodes."""
        comparison = operators.COMPARISONS.get(type(node))
        if comparison is not None and isinstance(node, exp.Binary):
            for column, other in ((node.left, node.right), (node.right, node.left)):
                if self._is_time_column(column):
                    self._as_epoch_millis(other)
                    break
            self._compare(comparison, node, node.left, node.right)
            return ty.BOOLEAN
        if isinstance(node, exp.Between):
            if self._is_time_column(node.this):
                self._as_epoch_millis(node.args["low"])
                self._as_epoch_millis(node.args["high"])
            for bound, kind in ((node.args["low"], exp.GTE), (node.args["high"], exp.LTE)):
                self._compare(operators.COMPARISONS[kind], node, node.this, bound)
            return ty.BOOLEAN
        if isinstance(node, exp.In) and not node.args.get("query"):
            for operand in (node.this, *node.expressions):
                self._operand(operand)
            try:
                operators.in_list_type(node.this, node.expressions, self._operand)
            except operators.OperatorError as error:
                raise self._refusal(error, node) from error
            return ty.BOOLEAN
        if isinstance(node, exp.Cast):
            target = _from_sqlglot(node.to, self.custom)
            try:
                casts.check_cast(self._operand(node.this), target)
            except casts.CastError as error:
                raise self._refusal(operators.OperatorError(str(error), late=True),
                                    node) from error
            return target
        return None

    def _is_time_column(self, node: exp.Expr) -> bool:
        """Whether a filter compares ``node`` as ksqlDB's magic timestamp: ROWTIME, WINDOWSTART
        or WINDOWEND written bare, in WHERE (or HAVING)."""
        return (self.clause in ("WHERE", "HAVING") and isinstance(node, exp.Column)
                and not node.table and node.name.upper() in _TIME_COLUMNS
                and self._lambda_variable(node.name) is None)

    def _as_epoch_millis(self, node: exp.Expr) -> None:
        """A string literal compared with a magic timestamp column is the epoch milliseconds
        of the (possibly partial) timestamp it spells (ksqlDB's
        ``StatementRewriteForMagicPseudoTimestamp``): the tree is rewritten in place."""
        text = node.name if isinstance(node, exp.Literal) and node.is_string else None
        if text is None:
            return
        try:
            millis = partial_timestamp_millis(text)
        except ValueError as error:
            raise QueryError(str(error)) from error
        node.replace(exp.Literal.number(millis))

    def _arithmetic(self, symbol: str, node: exp.Binary) -> ty.SqlType:
        """The type of ``node`` (``left <symbol> right``), its operands already typed."""
        left, right = (None if isinstance(o, exp.Null) else functions.ksql_type(o)
                       for o in (node.left, node.right))
        try:
            return operators.arithmetic_type(symbol, left, right, self.text(node))
        except operators.OperatorError as error:
            raise self._refusal(error, node) from error

    def _operand(self, node: exp.Expr) -> ty.SqlType | None:
        """An operator's operand's type; None for the NULL literal."""
        sql_type = self.type_of(node)
        return None if isinstance(node, exp.Null) else sql_type

    def _compare(self, comparison: operators.Comparison, node: exp.Expr, left: exp.Expr,
                 right: exp.Expr) -> None:
        problem = operators.comparison_problem(
            comparison, self._operand(left), self._operand(right), self.text(left),
            self.text(right))
        if problem is not None:
            raise self._refusal(operators.OperatorError(problem), node)

    def _refusal(self, error: operators.OperatorError, node: exp.Expr) -> QueryError:
        """ksqlDB's wording: an error found when compiling the clause is prefixed with its
        kind, one found when typing a WHERE names the clause and the expression."""
        if error.late:
            return QueryError(operators.COMPILE_PREFIXES.get(self.clause, "") + str(error))
        prefix = f"Error in {self.clause} expression: " if self.clause in _FILTERS else ""
        return QueryError(f"{prefix}{error}\nStatement: {self.text(node)}")

    def text(self, node: exp.Expr) -> str:
        """``node`` as ksqlDB's messages print it once it rewrote the query's column references
        (ColumnReferenceRewriter): unqualified, and in a join named ``ALIAS_COLUMN`` (join
        criteria are typed before that rewrite)."""
        return operators.ksql_text(node, None if self.clause == "JOIN ON" else self.column_text)

    def qualified_text(self, node: exp.Expr) -> str:
        """``node`` as ksqlDB's AST writes it: its columns qualified by their source."""
        def qualified(column: exp.Column) -> str:
            if self._lambda_variable(column.name) is not None:
                return column.name
            return join_rules.qualified_column(column, lambda c: self.scope.resolve(
                c.name, c.table or None, self.clause)[0])
        return operators.ksql_text(node, qualified)

    def column_text(self, node: exp.Column) -> str:
        if self._lambda_variable(node.name) is not None:
            return node.name
        return self.scope.column_text(node, self.clause)

    def value_type(self, expression: exp.Expr) -> ty.SqlType:
        """The type of a selected expression: ksqlDB's SelectionUtil gives none to NULL."""
        sql_type = self.type_of(expression)
        if isinstance(unparenthesised(expression), exp.Null):
            raise QueryError("Can't infer a type of null. Please explicitly cast it to a required "
                             "type, e.g. CAST(null AS VARCHAR).")
        return sql_type

    def check_filter(self, condition: exp.Expr, clause: str) -> None:
        """ksqlDB's FilterTypeValidator: a WHERE or HAVING condition is a BOOLEAN."""
        self.clause = clause
        sql_type = self._operand(condition)
        if sql_type != ty.BOOLEAN:
            shown = "null" if sql_type is None else sql_type.sql()
            raise QueryError(f"Type error in {clause} expression: Should evaluate to boolean but "
                             f"is {self.text(condition)} ({shown}) instead.")

    def _searched_case(self, node: exp.Case) -> ty.SqlType:
        """``CASE WHEN ... THEN ... ELSE ... END`` by ksqlDB's ExpressionTypeManager: each WHEN
        is a BOOLEAN, the THEN and ELSE results that are not NULL have one type, and NULL
        results take it."""
        result: ty.SqlType | None = None
        for when in node.args.get("ifs") or []:
            condition = self.type_of(when.this)
            if condition.base != "BOOLEAN":
                raise QueryError(f"WHEN operand type should be boolean.\nType for "
                                 f"'{self.text(when.this)}' is {ty.backticked(condition)}")
            then = self._operand(when.args["true"])
            if then is None:
                continue
            if result is not None and then != result:
                raise QueryError(
                    "Invalid Case expression. Type for all 'THEN' clauses should be the same.\n"
                    f"THEN expression 'WHEN {self.text(when.this)} THEN "
                    f"{self.text(when.args['true'])}' has type: {ty.backticked(then)}.\n"
                    f"Previous THEN expression(s) type: {ty.backticked(result)}.")
            result = then
        default = node.args.get("default")
        otherwise = self._operand(default) if default is not None else None
        if result is not None and otherwise is not None and otherwise != result:
            raise QueryError("Invalid Case expression. Type for the default clause should be the "
                             f"same as for 'THEN' clauses.\nTHEN type: {ty.backticked(result)}."
                             f"\nDEFAULT type: {ty.backticked(otherwise)}.")
        common = result or otherwise
        if common is None:
            raise QueryError("Invalid Case expression. All case branches have NULL type")
        for branch in [*(w.args["true"] for w in node.args.get("ifs") or []), default]:
            if isinstance(branch, exp.Null):
                functions.annotate(branch, common)
        return common

    def _deref(self, node: exp.Expr) -> ty.SqlType:
        base = self.type_of(node.this)
        field = deref_name(node)
        if isinstance(base, ty.StructType):
            found = base.field(field)
            if found is not None:
                return found
            raise QueryError(f"Could not find field '{field}' in '{node.this.sql()}'.")
        raise QueryError(f"Expected STRUCT type, got: {base.sql()}")

    def _literal(self, node: exp.Literal) -> ty.SqlType:
        if node.is_string:
            return ty.STRING
        text = str(node.this)
        if any(c in text for c in "eE"):
            return ty.DOUBLE
        if "." in text:
            return operators.decimal_of_value(Decimal(text))
        return _integer_literal_type(int(text))

    def _function(self, node: exp.Func) -> ty.SqlType:
        name = function_name(node)
        args = functions.arguments(node)
        if name in ("MAP", "STRUCT", "ARRAY"):
            return self._constructor(name, args)
        try:
            resolution = functions.resolve_call(name, [self._argument(a) for a in args])
        except FunctionError as error:
            raise QueryError(str(error)) from error
        init_args = resolution.signature.init_arguments(len(args))  # UdafUtil: literals
        for index in range(len(args) - init_args, len(args)) if init_args else ():
            if not _is_constant(args[index]):
                raise QueryError(f"Parameter {index + 1} passed to function {name} must be a "
                                 "literal constant, but was expression: "
                                 f"'{self.text(args[index])}'")
        for argument, param in zip(args, resolution.params, strict=False):
            if isinstance(argument, exp.Null):
                functions.annotate(argument, param)
        functions.annotate_params(node, resolution.params)
        return resolution.returns

    def _constructor(self, name: str, args: list[exp.Expr]) -> ty.SqlType:
        if name == "STRUCT":
            arg_types = [self.type_of(a) for a in args]
            fields = [(_struct_field_name(a, i), t) for i, (a, t)
                      in enumerate(zip(args, arg_types, strict=True))]
            for index, (field, field_type) in enumerate(fields):  # ksqlDB's SqlStruct.Builder
                first = next(((n, t) for n, t in fields[:index] if n == field), None)
                if first is not None:
                    raise QueryError(
                        "Duplicate field names found in STRUCT: "
                        f"'{ty.field_text(*first)}' and '{ty.field_text(field, field_type)}'")
            return ty.StructType(tuple(fields))
        if name == "ARRAY":
            if not args:
                raise QueryError("Array constructor cannot be empty. Please supply at least one "
                                 f"element ({_ISSUE_4239}).")
            element = self._user_list(args, "an array with all NULL elements",
                                      "cast a NULL value")
            return ty.ArrayType(element)
        if not args:
            raise QueryError("Map constructor cannot be empty. Please supply at least one key "
                             f"value pair ({_ISSUE_4239}).")
        keys, values = operators.map_entries(args)
        key = self._user_list(keys, "a map with all NULL keys", "cast a NULL key")
        value = self._user_list(values, "a map with all NULL values", "cast a NULL value")
        for argument in args:
            if isinstance(argument, exp.PropertyEQ):
                functions.annotate(argument, value)
        return ty.MapType(key, value)

    def _user_list(self, items: list[exp.Expr], all_null: str, workaround: str) -> ty.SqlType:
        """The common type of the elements of ARRAY[...] or the keys or values of MAP(...),
        by ksqlDB's coercion of a list (:func:`operators.list_type`); NULL literals take it."""
        for item in items:
            self.type_of(item)

        def typed(node: exp.Expr) -> ty.SqlType | None:  # typed just now: read, not re-typed
            if isinstance(node, exp.Null):
                return None
            return functions.ksql_type(node) or self.type_of(node)

        try:
            common = operators.list_type(items, typed)
        except operators.OperatorError as error:
            raise QueryError(str(error)) from error
        if common is None:
            raise QueryError(f"Cannot construct {all_null} ({_ISSUE_4239}). As a workaround, "
                             f"you may {workaround} to the desired type.")
        for item in items:
            if isinstance(item, exp.Null):
                functions.annotate(item, common)
        return common

    def _argument(self, node: exp.Expr) -> Argument:
        """One argument as function resolution sees it: a NULL literal, a lambda, a time unit
        written as a bare word, or a typed expression."""
        if isinstance(node, exp.Null):
            return None
        if isinstance(node, exp.Lambda):
            return LambdaArgument(len(node.expressions),
                                  lambda inputs: self._lambda_body(node, inputs))
        if (isinstance(node, exp.Column) and not node.table and node.name.upper() in TIME_UNITS
                and self._lambda_variable(node.name) is None):
            try:
                return self.type_of(node)
            except QueryError:
                return UnitArgument(node.name.upper())
        return self.type_of(node)

    def _lambda_body(self, node: exp.Lambda, inputs: tuple[ty.SqlType, ...]) -> ty.SqlType:
        names = [str(p.name).upper() for p in node.expressions]
        self.lambda_scopes.append(dict(zip(names, inputs, strict=True)))
        try:
            return functions.annotate(node, self.type_of(node.this))
        finally:
            self.lambda_scopes.pop()

    def _lambda_variable(self, name: str) -> ty.SqlType | None:
        for scope in reversed(self.lambda_scopes):
            if name.upper() in scope:
                return scope[name.upper()]
        return None


_ISSUE_4239 = "see https://github.com/confluentinc/ksql/issues/4239"
_FILTERS = ("WHERE", "HAVING")


def _is_constant(node: exp.Expr) -> bool:
    """A literal as ksqlDB's grammar reads one (a number's minus sign included)."""
    if isinstance(node, exp.Neg):
        node = node.this
    return isinstance(node, exp.Literal | exp.Boolean | exp.Null)


def _integer_literal_type(value: int) -> ty.SqlType:
    """ksqlDB's integer literal: an INTEGER when it fits one, else a BIGINT."""
    return ty.INTEGER if -(2**31) <= value <= 2**31 - 1 else ty.BIGINT
_TIME_COLUMNS = frozenset({"ROWTIME", *WINDOW_BOUNDS})


def _struct_field_name(argument: exp.Expr, index: int) -> str:
    if isinstance(argument, exp.PropertyEQ):
        name = argument.this
        quoted = isinstance(name, exp.Identifier) and bool(name.args.get("quoted"))
        return str(name.name) if quoted else str(name.name).upper()
    if isinstance(argument, exp.Alias):
        return argument.alias
    return f"F{index}"


def check_cast_types(query: Query) -> None:
    """The types a new statement's CASTs name must be ones ksqlDB can build (DECIMAL bounds,
    distinct STRUCT field names; a quoted name keeps its case). Checked when a statement is
    validated, never when a stored query is compiled again."""
    for cast in query.select.find_all(exp.Cast):
        for data_type in cast.to.find_all(exp.DataType):
            kind = data_type.this
            if kind == exp.DataType.Type.DECIMAL:
                problem = ty.decimal_problem(*_decimal_params(data_type))
            elif kind == exp.DataType.Type.STRUCT:
                struct = _from_sqlglot(data_type, {})  # its field names as the CAST types them
                assert isinstance(struct, ty.StructType)
                problem = ty.struct_fields_problem(list(struct.fields))
            else:
                continue
            if problem:
                raise QueryError(f"Failed to prepare statement: {problem}")


def sql_type_of(data_type: exp.DataType, custom: Mapping[str, ty.SqlType]) -> ty.SqlType:
    """A CAST's target type (the query's sqlglot type) as a ksqlDB type."""
    return _from_sqlglot(data_type, dict(custom))


def _decimal_params(data_type: exp.DataType) -> tuple[int, int]:
    """A DECIMAL's precision and scale as written (10 and 0 when omitted)."""
    params = [int(p.this.this) for p in data_type.expressions if isinstance(p, exp.DataTypeParam)]
    precision, scale = [*params, 10, 0][:2] if params else (10, 0)
    return precision, scale


def _from_sqlglot(data_type: exp.DataType, custom: dict[str, ty.SqlType]) -> ty.SqlType:
    kind = data_type.this
    types = exp.DataType.Type
    simple = {
        types.BOOLEAN: ty.BOOLEAN, types.INT: ty.INTEGER, types.BIGINT: ty.BIGINT, types.DOUBLE: ty.DOUBLE,
        types.FLOAT: ty.DOUBLE, types.VARCHAR: ty.STRING, types.TEXT: ty.STRING, types.CHAR: ty.STRING,
        types.VARBINARY: ty.BYTES, types.BINARY: ty.BYTES, types.DATE: ty.DATE, types.TIME: ty.TIME,
        types.TIMESTAMP: ty.TIMESTAMP, types.SMALLINT: ty.INTEGER, types.TINYINT: ty.INTEGER,
    }
    if kind in simple:
        return simple[kind]
    nested = [e for e in data_type.expressions if isinstance(e, exp.DataType)]
    if kind == types.DECIMAL:
        return ty.DecimalType(*_decimal_params(data_type))
    if kind == types.ARRAY and nested:
        return ty.ArrayType(_from_sqlglot(nested[0], custom))
    if kind == types.MAP and len(nested) == 2:
        return ty.MapType(_from_sqlglot(nested[0], custom), _from_sqlglot(nested[1], custom))
    if kind == types.STRUCT:
        fields = []
        for field in data_type.expressions:
            if isinstance(field, exp.ColumnDef) and isinstance(field.args.get("kind"), exp.DataType):
                quoted = isinstance(field.this, exp.Identifier) and field.this.quoted
                name = field.name if quoted else field.name.upper()  # `f1` keeps its case
                fields.append((name, _from_sqlglot(field.args["kind"], custom)))
        return ty.StructType(tuple(fields))
    if kind == types.USERDEFINED:
        name = str(data_type.args.get("kind") or "").upper()
        if name in custom:
            return custom[name]
        if name in ty.PRIMITIVE_ALIASES:
            return ty.Primitive(ty.PRIMITIVE_ALIASES[name])
    text = data_type.sql().upper()
    if text in ty.PRIMITIVE_ALIASES:
        return ty.Primitive(ty.PRIMITIVE_ALIASES[text])
    if text in custom:
        return custom[text]
    raise QueryError(f"Unsupported type in CAST: {data_type.sql()}")
