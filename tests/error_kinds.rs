//! Whose fault an error is (`irad::Error::kind`, `PassError::kind`,
//! `GradError::kind`): a fault of the program or request is
//! `ErrorKind::User`, a bug of irad `ErrorKind::Internal`, and the printed
//! text says `internal error: ` exactly for the latter.

use irad::ir::Location;
use irad::ir::interp::{ErrorKind, internal_message};
use irad::passes::PassError;
use irad::passes::forward::grad::GradError;
use irad::{Error, Source};

#[test]
fn a_run_time_error_of_the_program_is_the_users() {
    let src = Source::new("d.irad", "fn d(a: i64) -> i64 { 1 / a }");
    let m = irad::load(&src).expect("loads");
    let f = irad::find_function(&src, &m, "d").expect("d exists");
    let args = irad::parse_args(&Source::new("<args>", "0"), &m, f).expect("args");
    let err = irad::run(&src, &m, &irad::RunRequest::new(f, &args)).expect_err("divides by 0");
    assert!(matches!(err, Error::Run { .. }), "{err}");
    assert_eq!(err.kind(), ErrorKind::User);
    assert!(!err.to_string().contains("internal error"), "{err}");
}

#[test]
fn internal_errors_say_so_at_every_layer() {
    let err = Error::Internal {
        file: "f.irad".into(),
        message: internal_message("the stage made nothing"),
    };
    assert_eq!(err.kind(), ErrorKind::Internal);
    assert_eq!(
        err.to_string(),
        "f.irad:1:1: error: internal error: the stage made nothing"
    );

    let grad = GradError::Invalid {
        loc: Location::default(),
        msg: internal_message("no plan"),
    };
    assert_eq!(grad.kind(), ErrorKind::Internal);
    let request = GradError::Invalid {
        loc: Location::default(),
        msg: "a gradient needs a function returning f64".into(),
    };
    assert_eq!(request.kind(), ErrorKind::User);

    let pass = PassError::Grad(Box::new(grad));
    assert_eq!(pass.kind(), ErrorKind::Internal);
    let unknown = PassError::UnknownPass {
        name: "nope".into(),
        known: vec![],
    };
    assert_eq!(unknown.kind(), ErrorKind::User);
    let wrapped = Error::Pass {
        file: "f.irad".into(),
        err: pass,
    };
    assert_eq!(wrapped.kind(), ErrorKind::Internal);
}
