"""Running a plan: the driver (plan -> execute -> gates -> report) and searches."""
