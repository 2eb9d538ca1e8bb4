fn main() { eprintln!("tilelib: not yet implemented"); std::process::exit(2); }
