//! The simulated Kubernetes API server and the kubecache load generator.

pub mod raw;
pub mod raw_h2;
pub mod run;
pub mod sim;
pub mod tls;

pub mod chaos;
pub mod fanout;
pub mod fresh;

/// The defaults of a set of flags, as clap fills them in with no flag given.
pub(crate) fn flag_defaults<T: clap::Args + clap::FromArgMatches>() -> T {
    let command = T::augment_args(clap::Command::new("defaults"));
    T::from_arg_matches(&command.get_matches_from(["defaults"]))
        .expect("every flag has a default or is optional")
}
