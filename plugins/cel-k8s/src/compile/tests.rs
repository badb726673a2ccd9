use super::*;

fn eval(source: &str) -> Result<Value, EvalError> {
    let env = Environment::default();
    let compiled = env.compile(source, &["object"]).expect(source);
    let mut evaluation = env.evaluation();
    evaluation.set(
        "object",
        crate::from_json(
            &serde_json::json!({"items": [3, 1, 2], "name": "web-01"}),
            64,
        )
        .unwrap(),
    );
    evaluation.eval(&compiled)
}

#[test]
fn kubernetes_libraries() {
    for source in [
        "[1, 2, 3].isSorted() && ![2, 1].isSorted()",
        "object.items.sum() == 6 && object.items.min() == 1 && object.items.max() == 3",
        "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1",
        "'abc'.indexOf('c') == 2",
        "object.name.find('[0-9]+') == '01' && 'a1b22'.findAll('[0-9]+') == ['1', '22']",
        "'a1b22c3'.findAll('[0-9]+', 2) == ['1', '22']",
        "sets.contains([1, 2, 3], [1, 2]) && sets.equivalent([1, 2], [2, 1]) && sets.intersects([1], [1, 5])",
        "'AbC'.lowerAscii() == 'abc' && 'a-b'.replace('-', '_') == 'a_b' && 'a,b'.split(',') == ['a', 'b']",
        "['a', 'b'].join('-') == 'a-b' && ' x '.trim() == 'x' && 'hello'.substring(1, 3) == 'el'",
        "'%s has %d'.format(['x', 2]) == 'x has 2'",
        "has(object.name) && !has(object.missing)",
        "object.items.all(x, x > 0) && object.items.exists(x, x == 2) && object.items.exists_one(x, x == 3)",
        "object.items.map(x, x * 2) == [6, 2, 4] && object.items.filter(x, x > 1) == [3, 2]",
    ] {
        assert_eq!(eval(source), Ok(Value::Bool(true)), "{source}");
    }
}

#[test]
fn missing_libraries_are_refused_by_name() {
    let env = Environment::default();
    for (source, name) in [
        ("semver('1.0.0').major() == 1", "semver"),
        ("isSemver('1.0.0')", "isSemver"),
        ("optional.of(1).hasValue()", "optional.of"),
        ("base64.encode(b'x') == 'eA=='", "base64.encode"),
    ] {
        let err = env.compile(source, &[]).unwrap_err();
        assert!(
            matches!(&err, CompileError::MissingLibrary { name: n, .. } if n == name),
            "{source}: {err}"
        );
    }
    let err = env
        .compile(
            "authorizer.group('apps').resource('deployments').check('create').allowed()",
            &["object"],
        )
        .unwrap_err();
    assert!(err.to_string().contains("`check`"), "{err}");
    let err = env.compile("authorizer == null", &["object"]).unwrap_err();
    assert_eq!(err, CompileError::UnknownVariable("authorizer".into()));
    let err = env.compile("frobnicate(1)", &[]).unwrap_err();
    assert_eq!(err, CompileError::UnknownFunction("frobnicate".into()));
}

#[test]
fn optional_types_are_there_when_the_environment_asks_for_them() {
    let plain = Environment::default();
    assert!(
        plain
            .compile("object.?spec.orValue(1) == 1", &["object"])
            .is_err()
    );
    let env = Environment::with_optional_types(Limits::default());
    let object =
        crate::from_json(&serde_json::json!({"spec": {"a": 2}, "m": {"k": "v"}}), 16).unwrap();
    for source in [
        "object.?spec.?a.orValue(0) == 2",
        "object.?spec.?missing.orValue(7) == 7",
        "!object.?missing.hasValue()",
        "object.m[?'k'].orValue('') == 'v'",
        "optional.of(1).value() == 1",
        "optional.none().or(optional.of(3)).value() == 3",
    ] {
        let compiled = env
            .compile(source, &["object"])
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let mut evaluation = env.evaluation();
        evaluation.set("object", object.clone());
        assert_eq!(
            evaluation.eval(&compiled).ok(),
            Some(Value::Bool(true)),
            "{source}"
        );
    }
}

#[test]
fn lenient_or_value_reads_a_plain_chain_as_optional() {
    let object = crate::from_json(
        &serde_json::json!({"spec": {"a": 2, "list": [{"x": 1}]}, "m": {"k": "v"}}),
        16,
    )
    .unwrap();
    let eval = |env: &Environment, source: &str| {
        let compiled = env
            .compile(source, &["object"])
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let mut evaluation = env.evaluation();
        evaluation.set("object", object.clone());
        evaluation.eval(&compiled)
    };
    let lenient = Environment::with_optional_types(Limits::default()).with_lenient_or_value();
    for source in [
        // Present: its value; missing anywhere along the chain: the default.
        "object.spec.a.orValue(0) == 2",
        "object.spec.missing.orValue(7) == 7",
        "object.nope.deeper.orValue('d') == 'd'",
        "object.spec.list[0].x.orValue(0) == 1",
        "object.spec.list[5].x.orValue(9) == 9",
        "object.m['k'].orValue('') == 'v'",
        // Chains already optional, and other calls, mean what they meant.
        "object.?spec.?a.orValue(0) == 2",
        "object.spec.list.map(e, e.?x.orValue(0)) == [1]",
    ] {
        assert_eq!(
            eval(&lenient, source).ok(),
            Some(Value::Bool(true)),
            "{source}"
        );
    }
    // Standard CEL refuses orValue on a value that is not optional.
    let strict = Environment::with_optional_types(Limits::default());
    assert!(eval(&strict, "object.spec.a.orValue(0) == 2").is_err());
}

#[test]
fn optional_reads_of_variables_evaluate_them() {
    let env = Environment::with_optional_types(Limits::default()).with_lenient_or_value();
    let variables = vec![
        (
            "priv".to_owned(),
            env.compile("object.privileged", &["object"]).unwrap(),
        ),
        (
            "broken".to_owned(),
            env.compile("object.nope.deeper", &["object"]).unwrap(),
        ),
    ];
    let object = crate::from_json(&serde_json::json!({"privileged": true}), 16).unwrap();
    for (source, expected) in [
        ("variables.priv.orValue(false)", Some(Value::Bool(true))),
        ("variables.?priv.orValue(false)", Some(Value::Bool(true))),
        ("variables[?'priv'].orValue(false)", Some(Value::Bool(true))),
        // A variable that fails to evaluate fails the expression reading
        // it: never the default.
        ("variables.broken.orValue(false)", None),
        ("variables.?broken.orValue(false)", None),
    ] {
        let compiled = env
            .compile(source, &["object", "variables"])
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let mut scope = crate::Scope::new(env.evaluation(), &variables);
        scope.set("object", object.clone());
        assert_eq!(scope.eval(&compiled).ok(), expected, "{source}");
    }
}

#[test]
fn attack_huge_comprehension_fails_closed() {
    // 300 x 300 x 300 iterations: far over the budget.
    let range = (0..300)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let source = format!("[{range}].all(a, [{range}].all(b, [{range}].all(c, a + b + c >= 0)))");
    let env = Environment::default();
    let compiled = env.compile(&source, &[]).unwrap();
    assert_eq!(
        env.evaluation().eval(&compiled),
        Err(EvalError::CostExceeded(crate::limits::DEFAULT_COST_BUDGET))
    );
}

#[test]
fn attack_deep_nesting_and_size_are_refused() {
    let env = Environment::default();
    let deep = format!("{}1{}", "(".repeat(500), ")".repeat(500));
    assert!(matches!(
        env.compile(&deep, &[]),
        Err(CompileError::TooDeep { .. })
    ));
    let not = format!("{}true", "!".repeat(3000));
    assert!(matches!(
        env.compile(&not, &[]),
        Err(CompileError::TooDeep { .. })
    ));
    let deep_list = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    assert!(matches!(
        env.compile(&deep_list, &[]),
        Err(CompileError::TooDeep { .. })
    ));
    let long = format!("'{}' == ''", "a".repeat(20_000));
    assert!(matches!(
        env.compile(&long, &[]),
        Err(CompileError::TooLong { .. })
    ));
}

#[test]
fn attack_long_operator_chains_are_refused() {
    let env = Environment::default();
    let wide = vec!["1"; 4000].join("+");
    assert_eq!(
        env.compile(&wide, &[]).err(),
        Some(CompileError::TooManyOperators {
            count: 3999,
            max: crate::limits::DEFAULT_MAX_OPERATORS
        })
    );
}

#[test]
fn operator_chains_at_the_limit_evaluate() {
    // At the limit, the chain compiles and evaluates without overflowing
    // (on an 8 MiB stack: see nesting_at_the_limit_evaluates).
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            let env = Environment::default();
            let limits = *env.limits();
            let chain = vec!["1"; limits.max_operators + 1].join("+");
            let compiled = env.compile(&chain, &[]).unwrap();
            assert_eq!(
                env.evaluation().eval(&compiled),
                Ok(Value::Int(limits.max_operators as i64 + 1))
            );
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn nesting_at_the_limit_evaluates() {
    // The cel crate's parser and interpreter recurse per level with large
    // frames in debug builds: run on an 8 MiB stack (release frames, as in
    // the wasm component, are several times smaller).
    std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(|| {
            let env = Environment::default();
            let open = usize::from(env.limits().max_nesting);
            let nested = format!("{}1{}", "[".repeat(open), "]".repeat(open));
            let compiled = env.compile(&nested, &[]).unwrap();
            assert!(env.evaluation().eval(&compiled).is_ok());
        })
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn attack_wide_lists_are_refused() {
    let env = Environment::default();
    // Many nodes without operators: a wide list.
    let list = format!("[{}] == []", vec!["1"; 4000].join(","));
    assert_eq!(
        env.compile(&list, &[]).err(),
        Some(CompileError::TooManyNodes {
            max: crate::limits::DEFAULT_MAX_NODES
        })
    );
}

#[test]
fn lazy_fields() {
    let env = Environment::default();
    let compiled = env
        .compile(
            "variables.a && variables.b.exists(x, x == variables.c)",
            &["variables"],
        )
        .unwrap();
    let fields: Vec<_> = compiled.fields_of("variables").into_iter().collect();
    assert_eq!(fields, ["a", "b", "c"]);
}

fn eval_with(source: &str, object: Value) -> Result<Value, EvalError> {
    let env = Environment::default();
    let compiled = env.compile(source, &["object"]).expect(source);
    let mut evaluation = env.evaluation();
    evaluation.set("object", object);
    evaluation.eval(&compiled)
}

#[test]
fn attack_huge_strings_built_by_join_fail_closed() {
    // 1,000 copies of a 100 KB string joined: 100 MB unless counted.
    let range = (0..1000).map(|i| i.to_string()).collect::<Vec<_>>();
    let source = format!("[{}].map(x, object).join('') != ''", range.join(","));
    let big = Value::String(std::sync::Arc::new("a".repeat(100_000)));
    assert_eq!(
        eval_with(&source, big),
        Err(EvalError::CostExceeded(crate::limits::DEFAULT_COST_BUDGET))
    );
}

#[test]
fn attack_huge_strings_built_by_concatenation_fail_closed() {
    // Each level doubles the string; the sizes of `+`'s operands count.
    let mut source = "object".to_owned();
    for _ in 0..5 {
        source = format!("[{source}].map(s, s + s + s + s)[0]");
    }
    let big = Value::String(std::sync::Arc::new("a".repeat(10_000)));
    assert_eq!(
        eval_with(&format!("size({source}) > 0"), big),
        Err(EvalError::CostExceeded(crate::limits::DEFAULT_COST_BUDGET))
    );
}

#[test]
fn attack_huge_replacements_fail_closed() {
    let big = Value::String(std::sync::Arc::new("a".repeat(5_000)));
    assert_eq!(
        eval_with("size(object.replace('a', object)) > 0", big),
        Err(EvalError::CostExceeded(crate::limits::DEFAULT_COST_BUDGET))
    );
}

#[test]
fn attack_huge_lists_built_by_concatenation_fail_closed() {
    let range = (0..1000)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let source = format!("size([{range}].map(x, object + object + object)) > 0");
    let list = Value::List(std::sync::Arc::new(vec![Value::Int(1); 2_000]));
    assert_eq!(
        eval_with(&source, list),
        Err(EvalError::CostExceeded(crate::limits::DEFAULT_COST_BUDGET))
    );
}

#[test]
fn presence_tests_never_error_on_what_they_test() {
    // cel-go: `has()` on null, on a missing parent or on a scalar is false.
    let object = crate::from_json(
        &serde_json::json!({"spec": {"a": null, "s": "x", "m": {"k": 1}}}),
        16,
    )
    .unwrap();
    for (source, expected) in [
        ("has(object.spec.m.k)", true),
        ("has(object.spec.m.missing)", false),
        ("has(object.spec.a.b)", false),
        ("has(object.spec.s.b)", false),
        ("has(object.spec.missing.deeper.still)", false),
        ("has(object.spec.a)", true),
        ("!has(object.nope.x) && has(object.spec)", true),
    ] {
        assert_eq!(
            eval_with(source, object.clone()),
            Ok(Value::Bool(expected)),
            "{source}"
        );
    }
}
