-- Lambda parameters (ksqlDB's AstSanitizer): not named as a source's column, nor as a
-- parameter of an enclosing lambda; lambdas side by side may share names.
CREATE STREAM L (K STRING KEY, A ARRAY<INT>, M MAP<STRING, INT>, X INT) WITH (kafka_topic='l', value_format='JSON');
CREATE STREAM R (K STRING KEY, Y INT) WITH (kafka_topic='r', value_format='JSON');
CREATE STREAM Q (K STRING KEY, A ARRAY<INT>, `x` INT) WITH (kafka_topic='q', value_format='JSON');

-- error: Reusing lambda arguments in nested lambda is not allowed
CREATE STREAM O AS SELECT K, TRANSFORM(A, Z => TRANSFORM(A, Z => Z + 1)) AS T FROM L;

-- error: Reusing lambda arguments in nested lambda is not allowed
CREATE STREAM O AS SELECT K, TRANSFORM(A, Z => TRANSFORM(M, (Q, W) => Q, (Q, Z) => W)) AS T FROM L;

-- error: Reusing lambda arguments in nested lambda is not allowed
CREATE STREAM O AS SELECT K, A FROM L WHERE ARRAY_LENGTH(FILTER(A, Z => ARRAY_LENGTH(FILTER(A, Z => Z > 0)) > 0)) > 0;

-- ok
CREATE STREAM O AS SELECT K, TRANSFORM(M, (Q, W) => Q, (Q, W) => W + 1) AS T, TRANSFORM(A, Z => Z + 1) AS U, TRANSFORM(A, Z => Z * 2) AS V FROM L;

-- ok
CREATE STREAM O AS SELECT K, TRANSFORM(A, Z => TRANSFORM(A, W => W + Z)) AS T FROM L;

-- error: Lambda function argument can't be a column name: X
CREATE STREAM O AS SELECT K, TRANSFORM(A, X => X + 1) AS T FROM L;

-- error: Lambda function argument can't be a column name: K
CREATE STREAM O AS SELECT K, TRANSFORM(A, k => k + 1) AS T FROM L;

-- A joined source's columns too.
-- error: Lambda function argument can't be a column name: Y
CREATE STREAM O AS SELECT L.K, TRANSFORM(A, Y => Y + 1) AS T FROM L JOIN R WITHIN 1 MINUTE ON L.K = R.K;

-- A pseudo column is no column of a source's schema.
-- ok
CREATE STREAM O AS SELECT K, TRANSFORM(A, ROWTIME => ROWTIME + 1) AS T FROM L;

-- A quoted parameter keeps its case.
-- error: Lambda function argument can't be a column name: x
CREATE STREAM O AS SELECT K, TRANSFORM(A, `x` => `x` + 1) AS T FROM Q;

-- A quoted parameter beside a column of its name in another case, which the translation would
-- take for it, is refused too.
-- error: Lambda function argument can't be a column name: a
CREATE STREAM O AS SELECT K, TRANSFORM(A, `a` => `a` + 1) AS T FROM L;
