"""What a platform team sets up once for the jobs of a team: its training namespace (TrainingNamespace)."""
