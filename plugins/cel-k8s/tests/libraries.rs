//! Kubernetes' quantity, URL and IP/CIDR CEL libraries: every function,
//! with the API server's results and error messages, and hostile inputs.

use kiln_cel_k8s::{Environment, EvalError, Value};

fn eval(source: &str) -> Result<Value, EvalError> {
    let env = Environment::default();
    let compiled = env.compile(source, &["object"]).expect(source);
    let mut evaluation = env.evaluation();
    evaluation.set("object", Value::Null);
    evaluation.eval(&compiled)
}

fn eval_on(source: &str, object: &str) -> Result<Value, EvalError> {
    let env = Environment::default();
    let compiled = env.compile(source, &["object"]).expect(source);
    let mut evaluation = env.evaluation();
    evaluation.set(
        "object",
        Value::String(std::sync::Arc::new(object.to_owned())),
    );
    evaluation.eval(&compiled)
}

fn all_true(cases: &[&str]) {
    for source in cases {
        assert_eq!(eval(source), Ok(Value::Bool(true)), "{source}");
    }
}

fn error_of(source: &str) -> String {
    match eval(source) {
        Err(EvalError::Execution(e)) => e,
        other => panic!("{source}: expected an error, got {other:?}"),
    }
}

#[test]
fn quantity_functions() {
    all_true(&[
        "isQuantity('1Gi') && isQuantity('500m') && isQuantity('1e3') && isQuantity('-1.5')",
        "!isQuantity('1 Gi') && !isQuantity('') && !isQuantity('1Gb') && !isQuantity(' 1')",
        "quantity('1Gi') == quantity('1024Mi') && quantity('1') == quantity('1000m')",
        "quantity('1Gi') != quantity('1G')",
        "quantity('1Gi').isGreaterThan(quantity('1G')) && quantity('1G').isLessThan(quantity('1Gi'))",
        "!quantity('1').isGreaterThan(quantity('1000m')) && !quantity('1').isLessThan(quantity('1000m'))",
        "quantity('200M').compareTo(quantity('0.2G')) == 0 && quantity('1').compareTo(quantity('2')) == -1",
        "quantity('2').compareTo(quantity('1')) == 1 && quantity('-2').compareTo(quantity('-1')) == -1",
        "quantity('1e2147483647').isGreaterThan(quantity('1e2147483646'))",
        "quantity('1e-2147483647') == quantity('1n')",
        "quantity('50k').sign() == 1 && quantity('-50k').sign() == -1 && quantity('0').sign() == 0",
        "quantity('50k').isInteger() && !quantity('9999999999999999999999999999999999999').isInteger()",
        "!quantity('50703m').isInteger() && quantity('50000m').isInteger()",
        "quantity('50k').asInteger() == 50000 && quantity('-1Ki').asInteger() == -1024",
        "quantity('50.703m').asApproximateFloat() > 0.0507 && quantity('50.703m').asApproximateFloat() < 0.0508",
        "quantity('50k').add(quantity('20k')) == quantity('70k') && quantity('50k').add(20) == quantity('50020')",
        "quantity('50k').sub(quantity('20k')) == quantity('30k') && quantity('50k').sub(20) == quantity('49980')",
        "quantity('1').sub(quantity('2')).sign() == -1 && quantity('1.5').add(quantity('500m')).asInteger() == 2",
        "quantity('1e-3').add(quantity('1')) == quantity('1001m')",
    ]);
    assert_eq!(
        error_of("quantity('1 Gi') == quantity('1Gi')"),
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    );
    assert!(error_of("quantity('1KK').sign() == 1").contains("unable to parse quantity's suffix"));
    assert_eq!(
        error_of("quantity('50703m').asInteger() == 1"),
        "cannot convert value to integer"
    );
    assert_eq!(
        error_of("quantity('9999999999999999999999').asInteger() == 1"),
        "cannot convert value to integer"
    );
    assert!(
        error_of("quantity('1e2000').add(quantity('1')) == quantity('1')").contains("apart"),
        "spread"
    );
}

#[test]
fn url_functions() {
    all_true(&[
        "isURL('https://example.com:80/path?query=val#fragment') && isURL('/absolute-path')",
        "!isURL('../relative-path') && !isURL('example.com') && !isURL('') && !isURL(':foo')",
        "!isURL('https://exa mple.com') && !isURL('https://example.com:8a/') && !isURL('/a%zz')",
        "url('https://example.com/').getScheme() == 'https' && url('HTTP://x/').getScheme() == 'http'",
        "url('https://example.com:80/').getHost() == 'example.com:80'",
        "url('https://[::1]:80/').getHost() == '[::1]:80' && url('https://[::1]:80/').getHostname() == '::1'",
        "url('https://example.com:80/').getHostname() == 'example.com' && url('/path').getHostname() == ''",
        "url('https://example.com:80/').getPort() == '80' && url('https://example.com/').getPort() == ''",
        "url('https://example.com/path with space/').getEscapedPath() == '/path%20with%20space/'",
        "url('https://example.com/a%2Fb').getEscapedPath() == '/a%2Fb' && url('https://example.com').getEscapedPath() == ''",
        "url('https://example.com/path?k1=a&k2=b&k2=c').getQuery() == {'k1': ['a'], 'k2': ['b', 'c']}",
        "url('https://example.com/path?a=x+y&b=%41').getQuery() == {'a': ['x y'], 'b': ['A']}",
        "url('https://example.com/path').getQuery() == {}",
        "url('https://user:pw@example.com/').getHost() == 'example.com'",
    ]);
    assert_eq!(
        error_of("url('../x').getScheme() == ''"),
        "URL parse error during conversion from string: parse \"../x\": invalid URI for request"
    );
    assert_eq!(
        error_of("url('https://example.com:8a/').getPort() == ''"),
        "URL parse error during conversion from string: parse \"https://example.com:8a/\": invalid port \":8a\" after host"
    );
    assert!(error_of("url(':x').getPort() == ''").contains("missing protocol scheme"));
    assert!(error_of("url('/a%zz').getPort() == ''").contains("invalid URL escape \"%zz\""));
}

#[test]
fn ip_functions() {
    all_true(&[
        "isIP('127.0.0.1') && isIP('::1') && isIP('2001:db8::abcd')",
        "!isIP('127.0.0.256') && !isIP('01.1.1.1') && !isIP('::ffff:1.2.3.4') && !isIP('fe80::1%eth0')",
        "!isIP('1.2.3') && !isIP('') && !isIP('10.0.0.0/8')",
        "ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::abcd')",
        "!ip.isCanonical('2001:DB8::ABCD') && !ip.isCanonical('2001:db8:0:0:0:0:0:abcd')",
        "ip('127.0.0.1').family() == 4 && ip('::1').family() == 6",
        "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified() && !ip('127.0.0.1').isUnspecified()",
        "ip('127.0.0.1').isLoopback() && ip('::1').isLoopback() && !ip('192.168.0.1').isLoopback()",
        "ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()",
        "ip('ff02::1').isLinkLocalMulticast() && !ip('fd00::1').isLinkLocalMulticast()",
        "ip('169.254.169.254').isLinkLocalUnicast() && !ip('192.168.0.1').isLinkLocalUnicast()",
        "ip('fe80::1').isLinkLocalUnicast() && !ip('fd80::1').isLinkLocalUnicast()",
        "ip('192.168.0.1').isGlobalUnicast() && !ip('255.255.255.255').isGlobalUnicast()",
        "ip('2001:db8::abcd').isGlobalUnicast() && !ip('ff00::1').isGlobalUnicast()",
        "string(ip('2001:DB8::1')) == '2001:db8::1' && ip('127.0.0.1') == ip('127.0.0.1')",
        "ip('127.0.0.1') != ip('127.0.0.2')",
    ]);
    assert_eq!(
        error_of("ip('01.1.1.1').family() == 4"),
        "IP Address \"01.1.1.1\" parse error during conversion from string: ParseAddr(\"01.1.1.1\"): IPv4 field has octet with leading zero"
    );
    assert_eq!(
        error_of("ip('::ffff:1.2.3.4').family() == 6"),
        "IPv4-mapped IPv6 address \"::ffff:1.2.3.4\" is not allowed"
    );
    assert_eq!(
        error_of("ip('fe80::1%eth0').family() == 6"),
        "IP address \"fe80::1%eth0\" with zone value is not allowed"
    );
    assert!(error_of("ip.isCanonical('x')").contains("parse error during conversion"));
}

#[test]
fn cidr_functions() {
    all_true(&[
        "isCIDR('192.168.0.0/16') && isCIDR('::1/128') && isCIDR('192.168.0.1/16')",
        "!isCIDR('192.168.0.0/33') && !isCIDR('::1/129') && !isCIDR('::ffff:1.2.3.4/24') && !isCIDR('10.0.0.0')",
        "!isCIDR('10.0.0.0/08') && !isCIDR('fe80::%eth0/64')",
        "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1')) && !cidr('192.168.0.0/24').containsIP(ip('192.168.1.1'))",
        "cidr('192.168.0.0/24').containsIP('192.168.0.1') && !cidr('192.168.0.0/24').containsIP('::1')",
        "cidr('192.168.0.0/16').containsCIDR(cidr('192.168.10.0/24')) && !cidr('192.168.1.0/24').containsCIDR(cidr('192.168.2.0/24'))",
        "cidr('192.168.0.0/16').containsCIDR('192.168.10.0/24') && !cidr('192.168.10.0/24').containsCIDR('192.168.0.0/16')",
        "cidr('192.168.0.1/24').ip() == ip('192.168.0.1') && cidr('::1/128').ip().family() == 6",
        "cidr('192.168.0.1/24').masked() == cidr('192.168.0.0/24') && cidr('192.168.0.1/24') != cidr('192.168.0.1/24').masked()",
        "cidr('192.168.0.0/16').prefixLength() == 16 && cidr('::1/128').prefixLength() == 128",
        "string(cidr('192.168.0.1/24').masked()) == '192.168.0.0/24' && string(cidr('::1/128')) == '::1/128'",
    ]);
    assert_eq!(
        error_of("cidr('192.168.0.0/33').prefixLength() == 1"),
        "network address parse error during conversion from string: network address parse error during conversion from string: netip.ParsePrefix(\"192.168.0.0/33\"): prefix length out of range"
    );
    assert!(error_of("cidr('10.0.0.0').prefixLength() == 1").contains("no '/'"));
    assert!(error_of("cidr('10.0.0.0/8').containsIP('10.0.0.256')").contains("parse error"));
}

#[test]
fn wrong_receivers_error_instead_of_panicking() {
    for source in [
        "'x'.family() == 4",
        "ip('1.2.3.4').prefixLength() == 1",
        "quantity('1').getHost() == ''",
        "url('/x').asInteger() == 1",
        "cidr('10.0.0.0/8').containsIP(1)",
        "quantity('1').add('x') == quantity('1')",
        "quantity(1) == quantity('1')",
    ] {
        assert!(
            matches!(eval(source), Err(EvalError::Execution(_))),
            "{source}"
        );
    }
}

#[test]
fn attack_megabyte_strings_are_refused_without_parsing() {
    let huge = "1".repeat(1 << 20);
    for source in [
        "isQuantity(object)",
        "isURL(object)",
        "isIP(object)",
        "isCIDR(object)",
    ] {
        // Either refused at the length limit (false) or over the cost
        // budget: never parsed, never a panic.
        let result = eval_on(source, &huge);
        assert!(
            matches!(
                result,
                Ok(Value::Bool(false)) | Err(EvalError::CostExceeded(_))
            ),
            "{source}: {result:?}"
        );
    }
    let long = "1".repeat(100_000);
    for source in [
        "isQuantity(object)",
        "isURL('/' + object)",
        "isIP(object)",
        "isCIDR(object)",
    ] {
        assert_eq!(eval_on(source, &long), Ok(Value::Bool(false)), "{source}");
    }
    match eval_on("quantity(object).sign() == 1", &long) {
        Err(EvalError::Execution(e)) => assert!(e.contains("more than the limit of 4096"), "{e}"),
        other => panic!("{other:?}"),
    }
}
