"""What every room shares, with no database: the errors, the message types, fault points, block types, output files."""
