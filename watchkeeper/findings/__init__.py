"""What a finding says, independent of where it is stored or printed (see `evidence`)."""
