-- LOCAL PLACEHOLDER (not committed): stands for another helper's 0013.
select 1;
